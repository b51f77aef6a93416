package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAddRowsKeepsTheLineAndDividesByCompleted(t *testing.T) {
	got, err := addRows([]byte(`{"scenario":"workflow","ops":90,"completed":100}`+"\n"), 1500)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scenario":"workflow","ops":90,"completed":100,"rows":1500,"rows_per_item":15}`
	if string(got) != want {
		t.Errorf("addRows = %s, want %s", got, want)
	}
}

func TestAddRowsFallsBackToOps(t *testing.T) {
	got, err := addRows([]byte(`{"ops":4}`), 10)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]float64
	if err := json.Unmarshal(got, &fields); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if fields["rows_per_item"] != 2.5 {
		t.Errorf("rows_per_item = %v, want 2.5 (10 rows / 4 ops)", fields["rows_per_item"])
	}
}

func TestAddRowsToAnEmptyObject(t *testing.T) {
	got, err := addRows([]byte(`{}`), 3)
	if err != nil || string(got) != `{"rows":3}` {
		t.Errorf("addRows({}) = %s, %v; want {\"rows\":3}", got, err)
	}
}

func TestAddRowsRefusesWhatIsNotAnObject(t *testing.T) {
	for _, in := range []string{"", "flowd: error: no such database", "[1]", `{"ops":`} {
		if _, err := addRows([]byte(in), 1); err == nil || !strings.Contains(err.Error(), "not a bench JSON object") {
			t.Errorf("addRows(%q): err = %v", in, err)
		}
	}
}
