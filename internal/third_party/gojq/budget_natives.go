package gojq

// This file is flowd's, not upstream gojq's (see README.md and budget.go):
// what each native may cost. before runs ahead of a native and refuses,
// from the sizes of its inputs, a result or a computation that would pass a
// bound; it charges what the native will allocate when that is known. after
// measures and charges the result of the natives whose result cannot be
// told in advance, or can only be as large as their inputs.

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strings"
	"unicode/utf8"
)

// before checks a call of native name on x with args.
func (b *budget) before(name string, x any, args []any) error {
	op := opName(name)
	switch name {
	case "_multiply":
		return b.beforeMultiply(op, number(args[0]), number(args[1]))
	case "_add":
		return b.beforeAdd(op, number(args[0]), number(args[1]))
	case "_subtract":
		l, r := number(args[0]), number(args[1])
		if la, ok := l.([]any); ok {
			if ra, ok := r.([]any); ok {
				return b.work(op, int64(len(la))*int64(len(ra)))
			}
		}
		return b.integer(op, max(bitLen(l), bitLen(r))+1)
	case "_divide":
		if l, ok := args[0].(string); ok {
			if r, ok := args[1].(string); ok {
				return b.beforeSplit(op, l, r)
			}
		}
	case "split":
		if s, ok := x.(string); ok {
			if sep, ok := args[0].(string); ok {
				return b.beforeSplit(op, s, sep)
			}
		}
	case "join":
		return b.beforeJoin(op, x, args[0])
	case "explode":
		if s, ok := x.(string); ok {
			return b.beforeExplode(op, s)
		}
	case "implode":
		if vs, ok := x.([]any); ok {
			return b.newString(op, 4*int64(len(vs)), false)
		}
	case "tojson", "tostring", "format", "_tohtml", "_touri", "_tourid", "_tocsv", "_totsv", "_tosh", "_tobase64", "_tobase64d":
		if name == "format" {
			f, ok := args[0].(string)
			if !ok {
				return nil
			}
			fn := formatToFunc("@" + f)
			if fn == nil {
				return nil
			}
			name, op = fn.Name, opName(fn.Name)
		}
		return b.beforeFormat(op, name, x)
	case "strftime", "strflocaltime":
		if f, ok := args[0].(string); ok {
			// A conversion writes at most 1,024 bytes (the widest padding).
			return b.newString(op, int64(len(f))+1030*int64(strings.Count(f, "%")), false)
		}
	case "setpath":
		return b.beforeSetpath(op, x, args[0], args[1], nil)
	case "_setpath":
		a, _ := args[2].(allocator)
		return b.beforeSetpath(op, x, args[0], args[1], a)
	case "delpaths", "_delpaths":
		b.last = sizedValue{} // the allocator's containers change in place
		var a allocator
		if name == "_delpaths" {
			a, _ = args[1].(allocator)
		}
		return b.charge(op, pathsMem(x, args[0], a))
	case "transpose":
		return b.beforeTranspose(op, x)
	case "indices", "index", "rindex":
		return b.beforeIndices(op, x, args[0])
	case "_index":
		if xs, ok := args[1].([]any); ok {
			return b.beforeIndices("indices", args[0], xs)
		}
	case "contains":
		return b.beforeContains(op, x, args[0])
	case "inside":
		return b.beforeContains(op, args[0], x)
	case "fromjson":
		if s, ok := x.(string); ok {
			return b.charge(op, decodeMem(s))
		}
	case "sort", "_sort_by", "unique", "_unique_by", "_group_by":
		if vs, ok := x.([]any); ok {
			// sortItems: a pointer and an item of two values for each.
			return b.charge(op, 40*int64(len(vs)))
		}
	}
	return nil
}

// after checks and charges the result w of native name, for the natives
// before could not size.
func (b *budget) after(name string, x any, args []any, w any) error {
	op := opName(name)
	switch w := w.(type) {
	case *big.Int:
		if err := b.integer(op, int64(w.BitLen())); err != nil {
			return err
		}
		return b.charge(op, shallowMem(w))
	case string, []any, map[string]any:
	default:
		return nil // scalars (boxed in the machine's own slots), iterators
	}
	switch name {
	case "_index", "_slice", "getpath", "ltrimstr", "rtrimstr", "trimstr", "ltrim", "rtrim", "trim",
		"min", "max", "_min_by", "_max_by", "_alternative", "_plus":
		// A part of an input, or the input itself; indices is new.
		if name == "_index" {
			if _, ok := args[1].([]any); ok {
				return b.charge(op, shallowMem(w))
			}
		}
		return nil
	case "tostring", "tojson", "format", "_tohtml", "_touri", "_tourid", "_tocsv", "_totsv", "_tosh", "_tobase64", "_tobase64d",
		"join", "split", "_divide", "explode", "implode", "strftime", "strflocaltime", "fromjson", "transpose":
		return nil // sized and charged before
	case "_multiply", "_add":
		if _, ok := w.(map[string]any); ok && name == "_multiply" {
			break // a deep merge: measured below
		}
		return nil // sized and charged before
	case "setpath", "_setpath":
		if b.last.pending {
			b.last = sizedValue{ptr: identity(w), n: length(w), size: b.last.size, depth: b.last.depth}
			return nil
		}
		// A path through a slice: measured below.
	case "reverse", "sort", "_sort_by", "unique", "_unique_by", "keys", "delpaths", "_delpaths", "ascii_downcase", "ascii_upcase":
		// As large as the input at most; keys boxes each key.
		n := shallowMem(w)
		if name == "keys" {
			n += 16 * int64(length(w))
		}
		return b.charge(op, n)
	case "add", "flatten":
		// As large as the input at most, built by appending (twice the
		// final size, at most, allocated on the way).
		return b.charge(op, 2*shallowMem(w))
	case "_group_by":
		n := shallowMem(w)
		for _, g := range w.([]any) {
			n += 2 * shallowMem(g)
		}
		if err := b.charge(op, n); err != nil {
			return err
		}
	case "_match", "_captures", "gmtime", "localtime", "strptime", "frexp", "modf", "builtins":
		// Built anew from small parts.
		if err := b.charge(op, deepMem(w)); err != nil {
			return err
		}
	default:
		if err := b.charge(op, shallowMem(w)); err != nil {
			return err
		}
	}
	size, depth := measure(w, b.maxValue)
	return b.fits(op, size, depth, false)
}

// newString refuses a string result of n bytes, or charges it.
func (b *budget) newString(op string, n int64, exact bool) error {
	if err := b.fits(op, n+2, 0, exact); err != nil {
		return err
	}
	return b.charge(op, strMem(int(n)))
}

// integer refuses an integer result of n bits.
func (b *budget) integer(op string, n int64) error {
	if n > MaxIntegerBits {
		return &LimitError{Kind: LimitInteger, Op: op, Size: n, Max: MaxIntegerBits}
	}
	return nil
}

// work refuses a computation of n steps.
func (b *budget) work(op string, n int64) error {
	if n > MaxWork {
		return &LimitError{Kind: LimitWork, Op: op, Size: n, Max: MaxWork}
	}
	return nil
}

// number reads a json.Number as the operators do.
func number(v any) any {
	if n, ok := v.(json.Number); ok {
		return parseNumber(n)
	}
	return v
}

// bitLen is the length of an integer in bits (0 for anything else: a
// float's arithmetic stays a float).
func bitLen(v any) int64 {
	switch v := v.(type) {
	case int:
		return 64
	case *big.Int:
		return int64(v.BitLen())
	}
	return 0
}

func (b *budget) beforeMultiply(op string, l, r any) error {
	if s, ok := l.(string); ok {
		return b.beforeRepeat(op, s, r)
	}
	if s, ok := r.(string); ok {
		return b.beforeRepeat(op, s, l)
	}
	if lm, ok := l.(map[string]any); ok {
		if rm, ok := r.(map[string]any); ok {
			ls, ld := measure(lm, b.maxValue)
			rs, rd := measure(rm, b.maxValue)
			if err := b.fits(op, ls+rs, max(ld, rd), false); err != nil {
				return err
			}
			return b.charge(op, mergeMem(lm, rm))
		}
	}
	if bitLen(l) > 0 && bitLen(r) > 0 {
		return b.integer(op, bitLen(l)+bitLen(r))
	}
	return nil
}

// beforeRepeat refuses s * n (repeatString) when the string would be too
// large.
func (b *budget) beforeRepeat(op, s string, n any) error {
	f, ok := ToFloat64(n)
	if !ok || f < 1 {
		return nil
	}
	size := float64(len(s)) * min(f, 1<<31)
	if size+2 > float64(b.maxValue) {
		return &LimitError{Kind: LimitValue, Op: op, Size: int64(size) + 2, Max: b.maxValue}
	}
	return b.charge(op, strMem(int(size)))
}

// mergeMem is the memory of the objects a deep merge of l and r makes.
func mergeMem(l, r map[string]any) int64 {
	n := mapMem(len(l) + len(r))
	for k, rv := range r {
		if lm, ok := l[k].(map[string]any); ok {
			if rm, ok := rv.(map[string]any); ok {
				n += mergeMem(lm, rm)
			}
		}
	}
	return n
}

func (b *budget) beforeAdd(op string, l, r any) error {
	switch l := l.(type) {
	case string:
		if r, ok := r.(string); ok {
			return b.newString(op, int64(len(l))+int64(len(r)), true)
		}
	case []any:
		if r, ok := r.([]any); ok && len(l) > 0 && len(r) > 0 {
			ls, ld := measure(l, b.maxValue)
			rs, rd := measure(r, b.maxValue)
			if err := b.fits(op, ls+rs-1, max(ld, rd), false); err != nil {
				return err
			}
			return b.charge(op, arrMem(len(l)+len(r)))
		}
	case map[string]any:
		if r, ok := r.(map[string]any); ok && len(l) > 0 && len(r) > 0 {
			ls, ld := measure(l, b.maxValue)
			rs, rd := measure(r, b.maxValue)
			if err := b.fits(op, ls+rs-1, max(ld, rd), false); err != nil {
				return err
			}
			return b.charge(op, mapMem(len(l)+len(r)))
		}
	}
	if bitLen(l) > 0 && bitLen(r) > 0 {
		return b.integer(op, max(bitLen(l), bitLen(r))+1)
	}
	return nil
}

// beforeSplit sizes the array of strings split (or `/` on strings) makes.
func (b *budget) beforeSplit(op, s, sep string) error {
	if s == "" {
		return nil
	}
	var n int
	if sep == "" {
		n = utf8.RuneCountInString(s)
	} else {
		n = strings.Count(s, sep) + 1
	}
	size := 2 + int64(len(s)) - int64(n-1)*int64(len(sep)) + 3*int64(n)
	if err := b.fits(op, size, 1, true); err != nil {
		return err
	}
	return b.charge(op, arrMem(n)+16*int64(n))
}

// beforeJoin sizes the string join makes: the strings, numbers and
// booleans joined, and the separator between them.
func (b *budget) beforeJoin(op string, x, sep any) error {
	vs, ok := values(x)
	if !ok || len(vs) == 0 {
		return nil
	}
	var n int64
	if s, ok := sep.(string); ok {
		n = int64(len(s)) * int64(len(vs)-1)
	}
	for _, v := range vs {
		switch v := v.(type) {
		case string:
			n += int64(len(v))
		case bool, int, float64, *big.Int, json.Number:
			s, _ := measure(v, b.maxValue)
			n += s
		}
		if n > b.maxValue {
			break
		}
	}
	return b.newString(op, n, n <= b.maxValue)
}

// beforeExplode sizes the array of code points explode makes.
func (b *budget) beforeExplode(op, s string) error {
	var size, n int64 = 2, 0
	for _, r := range s {
		size += intLen(int(r)) + 1
		n++
	}
	if err := b.fits(op, size, 1, true); err != nil {
		return err
	}
	return b.charge(op, arrMem(int(n))+8*n)
}

// beforeFormat sizes the string tojson, tostring or a @format makes of x:
// each escapes the text of x in its own way.
func (b *budget) beforeFormat(op, name string, x any) error {
	if name == "tostring" {
		if _, ok := x.(string); ok {
			return nil
		}
		name = "tojson"
	}
	if name == "tojson" {
		n, depth := escapedSize(x, b.maxValue)
		if err := b.fits(op, n+2, depth, false); err != nil {
			return err
		}
		return b.charge(op, strMem(int(n)))
	}
	text := func(v any) (int64, string, bool) {
		if s, ok := v.(string); ok {
			return int64(len(s)), s, true
		}
		n, _ := escapedSize(v, b.maxValue)
		return n, "", false
	}
	var n int64
	switch name {
	case "_tohtml", "_touri", "_tourid", "_tobase64", "_tobase64d":
		l, s, isString := text(x)
		switch {
		case name == "_tobase64":
			n = (l + 2) / 3 * 4
		case name == "_tourid" || name == "_tobase64d":
			n = l
		case !isString:
			n = 6 * l // escaped as it escapes a string, each byte at most six
		case name == "_tohtml":
			n = htmlLen(s)
		default:
			n = uriLen(s)
		}
	case "_tocsv", "_totsv", "_tosh":
		vs, ok := x.([]any)
		if !ok {
			if name != "_tosh" {
				return nil
			}
			vs = []any{x}
		}
		n = int64(max(len(vs)-1, 0))
		for _, v := range vs {
			l, s, isString := text(v)
			switch {
			case !isString:
				n += l
			case name == "_tocsv":
				n += 2 + l + int64(strings.Count(s, `"`)+strings.Count(s, "\x00"))
			case name == "_totsv":
				n += l + int64(strings.Count(s, "\t")+strings.Count(s, "\r")+strings.Count(s, "\n")+strings.Count(s, `\`)+strings.Count(s, "\x00"))
			default:
				n += 2 + l + 3*int64(strings.Count(s, "'")) + int64(strings.Count(s, "\x00"))
			}
			if n > b.maxValue {
				break
			}
		}
	default:
		return nil
	}
	return b.newString(op, n, n <= b.maxValue)
}

func htmlLen(s string) int64 {
	n := int64(len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>':
			n += 3
		case '&':
			n += 4
		case '\'', '"':
			n += 5
		}
	}
	return n
}

func uriLen(s string) int64 {
	n := int64(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			n += 2
		}
	}
	return n
}

// beforeSetpath sizes the result of setpath(p; n) on v from the size of v
// (the previous result's, when v is it: an assignment sets one path after
// another) and what the path changes.
func (b *budget) beforeSetpath(op string, v, p, n any, a allocator) error {
	b.last.pending = false
	path, ok := p.([]any)
	if !ok {
		return nil
	}
	delta, depth, mem, ok := b.pathCost(v, path, n, a)
	if !ok {
		return nil // a type error setpath reports, or a slice inside the path: measured after
	}
	var base, vd int64
	if b.last.ptr != 0 && b.last.ptr == identity(v) && b.last.n == length(v) {
		base, vd = b.last.size, b.last.depth
	} else {
		base, vd = measure(v, b.maxValue)
	}
	size := base + delta
	depth = max(depth, vd)
	if err := b.fits(op, size, depth, false); err != nil {
		return err
	}
	b.last = sizedValue{size: size, depth: depth, pending: true}
	return b.charge(op, mem)
}

// pathCost follows path into v as setpath does, to set n there: delta is
// how much the JSON text of v grows (the keys, padding and containers the
// path adds, n, less the value n replaces), depth how deep n lands, mem
// the memory of the containers setpath copies or makes (those a made
// already are changed in place). ok is false when the path cannot be
// followed ahead of setpath: a type error, or a slice before the last key.
func (b *budget) pathCost(v any, path []any, n any, a allocator) (delta, depth, mem int64, ok bool) {
	cur, in := v, true // in: cur is a value of v, not one setpath makes
	for i, k := range path {
		if cur == nil && in {
			delta, in = -4, false // the null setpath replaces with a container
		}
		switch k := k.(type) {
		case string:
			m, isMap := cur.(map[string]any)
			if cur != nil && !isMap {
				return 0, 0, 0, false
			}
			if m == nil {
				delta += 2
			}
			if a == nil || m == nil || !a.allocated(m) {
				mem += mapMem(len(m)+1) + 16
			}
			if e, has := m[k]; has {
				cur = e
				continue
			}
			delta += int64(len(k)) + 3
			if len(m) > 0 {
				delta++
			}
			cur, in = nil, false
		case int, float64, *big.Int, json.Number:
			j, _ := ToInt(k)
			arr, isArr := cur.([]any)
			if cur != nil && !isArr {
				return 0, 0, 0, false
			}
			if arr == nil {
				delta += 2
			}
			if j < 0 {
				if j += len(arr); j < 0 {
					return 0, 0, 0, false
				}
			}
			if j < len(arr) {
				if a == nil || !a.allocated(arr) {
					mem += arrMem(len(arr)) + 16
				}
				cur = arr[j]
				continue
			}
			if j >= 0x20000000 {
				return 0, 0, 0, false // setpath refuses it
			}
			delta += 4*int64(j-len(arr)) + int64(j-max(len(arr)-1, 0))
			mem += arrMem(grownCap(j+1)) + 16
			cur, in = nil, false
		case map[string]any:
			if i != len(path)-1 {
				return 0, 0, 0, false
			}
			return b.sliceCost(cur, k, n, a, delta, int64(i)+1, mem)
		default:
			return 0, 0, 0, false
		}
	}
	ns, nd := measure(n, b.maxValue)
	if in {
		old, _ := measure(cur, math.MaxInt64/4)
		delta -= old
	}
	return delta + ns, int64(len(path)) + nd, mem, true
}

// sliceCost is pathCost's last step when it is a slice {start, end} of
// arr: the elements there are replaced by those of the array n.
func (b *budget) sliceCost(cur any, sl map[string]any, n any, a allocator, delta, depth, mem int64) (int64, int64, int64, bool) {
	arr, isArr := cur.([]any)
	ns, isArr2 := n.([]any)
	if cur != nil && !isArr || !isArr2 {
		return 0, 0, 0, false
	}
	start, end, ok := sliceBounds(arr, sl)
	if !ok {
		return 0, 0, 0, false
	}
	var old int64
	for _, e := range arr[start:end] {
		s, _ := measure(e, math.MaxInt64/4)
		old += s
	}
	size, nd := measure(ns, b.maxValue)
	added := size - 2 - int64(max(len(ns)-1, 0)) // n's elements
	newLen := len(arr) - (end - start) + len(ns)
	delta += added - old + int64(max(newLen-1, 0)-max(len(arr)-1, 0))
	if a == nil || !a.allocated(arr) || len(ns) != end-start {
		mem += arrMem(newLen) + 16
	}
	return delta, depth + nd - 1, mem, true
}

// sliceBounds are the indices updateArraySlice replaces in arr.
func sliceBounds(arr []any, sl map[string]any) (start, end int, ok bool) {
	s, ok1 := sl["start"]
	e, ok2 := sl["end"]
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	if s != nil {
		i, ok := toIntFloor(s)
		if !ok {
			return 0, 0, false
		}
		start = clampIndex(i, 0, len(arr))
	}
	end = len(arr)
	if e != nil {
		i, ok := toIntCeil(e)
		if !ok {
			return 0, 0, false
		}
		end = clampIndex(i, start, len(arr))
	}
	return start, end, true
}

// pathsMem is the memory delpaths on v takes: the paths sorted, and a copy
// of each container on them (once: it deletes in place after).
func pathsMem(v, p any, a allocator) int64 {
	paths, ok := p.([]any)
	if !ok {
		return 0
	}
	n := arrMem(len(paths))
	seen := map[uintptr]bool{}
	for _, q := range paths {
		path, ok := q.([]any)
		if !ok {
			return n
		}
		cur := v
		for _, k := range path {
			switch c := cur.(type) {
			case map[string]any:
				if id := identity(c); !seen[id] && (a == nil || !a.allocated(c)) {
					seen[id] = true
					n += mapMem(len(c))
				}
				s, _ := k.(string)
				cur = c[s]
			case []any:
				if id := identity(c); !seen[id] && (a == nil || !a.allocated(c)) {
					seen[id] = true
					n += arrMem(len(c))
				}
				i, _ := ToInt(k)
				cur = index(c, i)
			default:
				cur = nil
			}
		}
	}
	return n
}

// beforeTranspose sizes the rows transpose makes: as many as the longest
// row, each as long as there are rows, padded with nulls.
func (b *budget) beforeTranspose(op string, x any) error {
	rows, ok := x.([]any)
	if !ok || len(rows) == 0 {
		return nil
	}
	var l, cells, frame int64
	for _, r := range rows {
		r, ok := r.([]any)
		if !ok {
			return nil
		}
		l = max(l, int64(len(r)))
		cells += int64(len(r))
		frame += 2 + int64(max(len(r)-1, 0))
	}
	k := int64(len(rows))
	xs, depth := measure(x, b.maxValue)
	elems := xs - 2 - (k - 1) - frame // the elements' own text
	size := 2 + max(l-1, 0) + l*(2+k-1) + elems + 4*(k*l-cells)
	if err := b.fits(op, size, depth, false); err != nil {
		return err
	}
	return b.charge(op, arrMem(int(l))+l*arrMem(int(k)))
}

// beforeIndices refuses a search of x in v (strings as code points, or
// arrays) that would compare too many elements.
func (b *budget) beforeIndices(op string, v, x any) error {
	var n, m int64
	switch v := v.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return nil
		}
		n, m = int64(utf8.RuneCountInString(v)), int64(utf8.RuneCountInString(s))
		if err := b.charge(op, arrMem(int(n))+arrMem(int(m))); err != nil { // explode of both
			return err
		}
	case []any:
		n, m = int64(len(v)), 1
		if xs, ok := x.([]any); ok {
			m = int64(len(xs))
		}
	default:
		return nil
	}
	if n < m {
		return nil
	}
	return b.work(op, (n-m+1)*m)
}

// beforeContains refuses contains on arrays that would compare every
// element of one with every element of the other too many times.
func (b *budget) beforeContains(op string, l, r any) error {
	la, ok := l.([]any)
	if !ok {
		return nil
	}
	ra, ok := r.([]any)
	if !ok {
		return nil
	}
	return b.work(op, int64(len(la))*int64(len(ra)))
}

// decodeMem estimates the memory fromjson takes for s: its strings, and
// each object, array and element it reads.
func decodeMem(s string) int64 {
	return 2*int64(len(s)) + 336*int64(strings.Count(s, "{")) + 24*int64(strings.Count(s, "[")) +
		64*int64(strings.Count(s, ",")+strings.Count(s, ":"))
}

// identity and length tell a container apart from another; identity is 0
// for anything else.
func identity(v any) uintptr {
	switch v.(type) {
	case map[string]any, []any:
		return reflect.ValueOf(v).Pointer()
	}
	return 0
}

func length(v any) int {
	switch v := v.(type) {
	case map[string]any:
		return len(v)
	case []any:
		return len(v)
	}
	return 0
}
