package sw

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// iso8601 matches the durations of ISO 8601 the DSL allows: days, hours,
// minutes and (fractional) seconds, e.g. "PT30S", "P1DT2H", "PT0.5S".
var iso8601 = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration reads a duration: an ISO 8601 string or an object of
// days, hours, minutes, seconds and milliseconds.
func parseDuration(v any) (time.Duration, error) {
	switch v := v.(type) {
	case string:
		if _, isExpr := exprSource(v); isExpr {
			return 0, fmt.Errorf("a duration given by an expression is not supported (write an ISO 8601 duration or an object)")
		}
		m := iso8601.FindStringSubmatch(v)
		if m == nil || v == "P" || v == "PT" || v[len(v)-1] == 'T' {
			return 0, fmt.Errorf("%q is not an ISO 8601 duration such as PT30S or P1DT2H", v)
		}
		var d time.Duration
		for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute} {
			if m[i+1] != "" {
				n, err := strconv.ParseInt(m[i+1], 10, 32)
				if err != nil {
					return 0, fmt.Errorf("%q is too long", v)
				}
				d += time.Duration(n) * unit
			}
		}
		if m[4] != "" {
			f, err := strconv.ParseFloat(m[4], 64)
			if err != nil || f > 1e9 {
				return 0, fmt.Errorf("%q is too long", v)
			}
			d += time.Duration(f * float64(time.Second))
		}
		return d, nil
	case map[string]any:
		units := map[string]time.Duration{"days": 24 * time.Hour, "hours": time.Hour, "minutes": time.Minute, "seconds": time.Second, "milliseconds": time.Millisecond}
		var d time.Duration
		for k, x := range v {
			unit, ok := units[k]
			if !ok {
				return 0, fmt.Errorf("%s is not a duration field (days, hours, minutes, seconds, milliseconds)", k)
			}
			num, ok := x.(json.Number)
			n, err := strconv.ParseInt(string(num), 10, 32)
			if !ok || err != nil || n < 0 {
				return 0, fmt.Errorf("%s must be a non-negative integer", k)
			}
			d += time.Duration(n) * unit
		}
		return d, nil
	}
	return 0, fmt.Errorf("a duration is an ISO 8601 string or an object of days, hours, minutes, seconds, milliseconds")
}
