package chat

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

type filterFunc func(e *evaluator, v any, a *args) (any, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs":        filterAbs,
		"attr":       filterAttr,
		"capitalize": strFilter("capitalize"),
		"count":      filterLength,
		"d":          filterDefault,
		"default":    filterDefault,
		"first":      filterFirst,
		"float":      filterFloat,
		"indent":     filterIndent,
		"int":        filterInt,
		"items":      filterItems,
		"join":       filterJoin,
		"last":       filterLast,
		"length":     filterLength,
		"list":       filterList,
		"lower":      strFilter("lower"),
		"map":        filterMap,
		"max":        minMax("max"),
		"min":        minMax("min"),
		"reject":     selectFilter("reject", false, false),
		"rejectattr": selectFilter("rejectattr", false, true),
		"replace":    filterReplace,
		"reverse":    filterReverse,
		"round":      filterRound,
		"safe":       filterString,
		"select":     selectFilter("select", true, false),
		"selectattr": selectFilter("selectattr", true, true),
		"sort":       filterSort,
		"string":     filterString,
		"sum":        filterSum,
		"title":      filterTitle,
		"tojson":     filterToJSON,
		"trim":       filterTrim,
		"unique":     filterUnique,
		"upper":      strFilter("upper"),
	}
}

// constantTimeFilters do not walk over their value (a string's first or
// last character is charged by iter).
var constantTimeFilters = map[string]bool{"length": true, "count": true, "default": true, "d": true, "first": true, "last": true, "attr": true}

func (e *evaluator) applyFilter(name string, v any, a *args) (any, error) {
	f, ok := filters[name]
	if !ok {
		return nil, rtErr("TemplateRuntimeError", "No filter named %s found.", pyRepr(name))
	}
	cost := 1
	if !constantTimeFilters[name] {
		cost += sizeCost(v)
	}
	for _, x := range a.pos {
		cost += sizeCost(x)
	}
	if err := e.step(cost); err != nil {
		return nil, err
	}
	return f(e, v, a)
}

func strFilter(name string) filterFunc {
	return func(e *evaluator, v any, a *args) (any, error) {
		if _, err := a.bind(name, nil, nil); err != nil {
			return nil, err
		}
		return strUnary(name, pyStr(v)), nil
	}
}

func filterAbs(e *evaluator, v any, a *args) (any, error) {
	i, f, isF, ok := num(v)
	if !ok {
		return nil, rtErr("TypeError", "bad operand type for abs(): '%s'", typeName(v))
	}
	if isF {
		return math.Abs(f), nil
	}
	if _, b := v.(bool); b {
		return i, nil
	}
	if i < 0 {
		return unary("-", i)
	}
	return i, nil
}

func filterAttr(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("attr", []string{"name"}, []any{required})
	if err != nil {
		return nil, err
	}
	name, err := strArg("attr", p[0])
	if err != nil {
		return nil, err
	}
	// Python's getattr only: a dict's keys are not its attributes.
	switch x := v.(type) {
	case *undefined:
		return nil, x.fail()
	case *dict:
		if m := boundMethod(x, name); m != nil {
			return m, nil
		}
		if unsafeMethods["dict"][name] {
			return unsafeAttr(x, name), nil
		}
		return undefinedIn(v, name), nil
	}
	return getAttr(v, name)
}

func filterLength(e *evaluator, v any, a *args) (any, error) {
	n, err := pyLen(v)
	return int64(n), err
}

func filterDefault(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("default", []string{"default_value", "boolean"}, []any{"", false})
	if err != nil {
		return nil, err
	}
	if _, isU := v.(*undefined); isU || truth(p[1]) && !truth(v) {
		return p[0], nil
	}
	return v, nil
}

func filterFirst(e *evaluator, v any, a *args) (any, error) {
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &undefined{hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func filterLast(e *evaluator, v any, a *args) (any, error) {
	items, err := e.iter(v)
	if err != nil {
		return nil, rtErr("TypeError", "'%s' object is not reversible", typeName(v))
	}
	if len(items) == 0 {
		return &undefined{hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

// pyFloatParse is Python's float(str).
func pyFloatParse(s string) (float64, bool) {
	t := strings.ToLower(pyStrip(s, nil, true, true))
	switch strings.TrimLeft(t, "+-") {
	case "inf", "infinity", "nan":
		f, err := strconv.ParseFloat(t, 64)
		return f, err == nil
	}
	if t == "" || strings.Contains(t, "__") || strings.HasPrefix(strings.TrimLeft(t, "+-"), "_") || strings.HasSuffix(t, "_") ||
		strings.ContainsAny(t, "xpo") {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func filterFloat(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("float", []string{"default"}, []any{0.0})
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.fail()
	case string:
		if f, ok := pyFloatParse(x); ok {
			return f, nil
		}
		return p[0], nil
	}
	if _, f, _, ok := num(v); ok {
		return f, nil
	}
	return p[0], nil
}

func filterInt(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("int", []string{"default", "base"}, []any{int64(0), int64(10)})
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case *undefined:
		return nil, x.fail()
	case string:
		base, err := intArg("int", p[1])
		if err != nil {
			return nil, err
		}
		t := pyStrip(x, nil, true, true)
		if !strings.HasPrefix(t, "_") && !strings.Contains(t, "__") && !strings.HasSuffix(t, "_") && base >= 2 && base <= 36 {
			digits := strings.ReplaceAll(t, "_", "")
			sign := ""
			if strings.HasPrefix(digits, "-") || strings.HasPrefix(digits, "+") {
				sign, digits = digits[:1], digits[1:]
			}
			if len(digits) > 2 && digits[0] == '0' {
				if p := strings.ToLower(digits[:2]); p == "0x" && base == 16 || p == "0o" && base == 8 || p == "0b" && base == 2 {
					digits = digits[2:]
				}
			}
			if i, err := strconv.ParseInt(sign+digits, int(base), 64); err == nil {
				return i, nil
			}
		}
		if f, ok := pyFloatParse(x); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
		return p[0], nil
	case bigInt:
		return x, nil
	}
	if i, f, isF, ok := num(v); ok {
		if isF {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return p[0], nil
			}
			return int64(f), nil
		}
		return i, nil
	}
	return p[0], nil
}

func filterIndent(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("indent", []string{"width", "first", "blank"}, []any{int64(4), false, false})
	if err != nil {
		return nil, err
	}
	var ind string
	switch w := p[0].(type) {
	case string:
		ind = w
	default:
		n, err := intArg("indent", w)
		if err != nil {
			return nil, err
		}
		if n > int64(e.limits.MaxOutput) {
			return nil, e.checkSize(e.limits.MaxOutput + 1)
		}
		ind = strings.Repeat(" ", int(max(n, 0)))
	}
	s := pyStr(v) + "\n"
	lines := splitLines(s, false)
	if err := e.checkSize(len(s) + len(lines)*len(ind)); err != nil {
		return nil, err
	}
	var b strings.Builder
	if truth(p[2]) {
		b.WriteString(strings.Join(lines, "\n"+ind))
	} else if len(lines) > 0 {
		b.WriteString(lines[0])
		for _, l := range lines[1:] {
			b.WriteByte('\n')
			if l != "" {
				b.WriteString(ind)
			}
			b.WriteString(l)
		}
	}
	out := b.String()
	if truth(p[1]) {
		out = ind + out
	}
	return out, nil
}

func filterItems(e *evaluator, v any, a *args) (any, error) {
	switch x := v.(type) {
	case *undefined:
		return []any{}, nil
	case *dict:
		return dictItems(x), nil
	}
	return nil, rtErr("TypeError", "Can only get item pairs from a mapping.")
}

// attrGetter is Jinja's make_attrgetter: a dotted path of items.
func attrGetter(attr any, def any, hasDef bool) (func(any) (any, error), error) {
	var parts []any
	switch x := attr.(type) {
	case string:
		for _, p := range strings.Split(x, ".") {
			if i, err := strconv.ParseInt(p, 10, 64); err == nil {
				parts = append(parts, i)
			} else {
				parts = append(parts, p)
			}
		}
	case int64:
		parts = []any{x}
	default:
		if attr != nil {
			return nil, rtErr("TypeError", "attribute must be a string or an integer, not %s", typeName(attr))
		}
	}
	return func(item any) (any, error) {
		var err error
		for _, p := range parts {
			if item, err = getItem(item, p); err != nil {
				return nil, err
			}
		}
		if _, isU := item.(*undefined); isU && hasDef {
			return def, nil
		}
		return item, nil
	}, nil
}

func filterJoin(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("join", []string{"d", "attribute"}, []any{"", nil})
	if err != nil {
		return nil, err
	}
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	get := func(x any) (any, error) { return x, nil }
	if p[1] != nil {
		if get, err = attrGetter(p[1], nil, false); err != nil {
			return nil, err
		}
	}
	sep := pyStr(p[0])
	parts := make([]string, len(items))
	size := 0
	for i, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		parts[i] = pyStr(x)
		size += len(parts[i]) + len(sep)
		if err := e.checkSize(size); err != nil {
			return nil, err
		}
	}
	return strings.Join(parts, sep), nil
}

func filterList(e *evaluator, v any, a *args) (any, error) {
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	return append([]any{}, items...), nil
}

func filterMap(e *evaluator, v any, a *args) (any, error) {
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	var fn func(any) (any, error)
	if len(a.pos) == 0 {
		var attr, def any
		hasDef := false
		for i, k := range a.kwNames {
			switch k {
			case "attribute":
				attr = a.kw[i]
			case "default":
				def, hasDef = a.kw[i], true
			default:
				return nil, rtErr("FilterArgumentError", "Unexpected keyword argument %s", pyRepr(k))
			}
		}
		if attr == nil {
			return nil, rtErr("FilterArgumentError", "map requires a filter argument")
		}
		if fn, err = attrGetter(attr, def, hasDef); err != nil {
			return nil, err
		}
	} else {
		name, ok := a.pos[0].(string)
		if !ok {
			return nil, rtErr("TypeError", "map: the filter name must be a string")
		}
		rest := &args{pos: a.pos[1:], kwNames: a.kwNames, kw: a.kw}
		fn = func(x any) (any, error) { return e.applyFilter(name, x, rest) }
	}
	out := make([]any, len(items))
	for i, it := range items {
		if out[i], err = fn(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func lowerIfStr(v any) any {
	if s, ok := v.(string); ok {
		return pyLower(s)
	}
	return v
}

func sortKey(caseSensitive bool, get func(any) (any, error)) func(any) any {
	return func(x any) any {
		if get != nil {
			x, _ = get(x)
		}
		if !caseSensitive {
			x = lowerIfStr(x)
		}
		return x
	}
}

func minMax(name string) filterFunc {
	return func(e *evaluator, v any, a *args) (any, error) {
		p, err := a.bind(name, []string{"case_sensitive", "attribute"}, []any{false, nil})
		if err != nil {
			return nil, err
		}
		items, err := e.iter(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return &undefined{hint: "No aggregated item, sequence was empty."}, nil
		}
		var get func(any) (any, error)
		if p[1] != nil {
			if get, err = attrGetter(p[1], nil, false); err != nil {
				return nil, err
			}
		}
		key := sortKey(truth(p[0]), get)
		best := items[0]
		for _, it := range items[1:] {
			c, err := pyCompare("<", key(it), key(best))
			if err != nil {
				return nil, err
			}
			if name == "min" && c < 0 || name == "max" && c > 0 {
				best = it
			}
		}
		return best, nil
	}
}

func selectFilter(name string, keep, byAttr bool) filterFunc {
	return func(e *evaluator, v any, a *args) (any, error) {
		items, err := e.iter(v)
		if err != nil {
			return nil, err
		}
		rest := a.pos
		get := func(x any) (any, error) { return x, nil }
		if byAttr {
			if len(rest) == 0 {
				return nil, rtErr("FilterArgumentError", "Missing parameter for attribute name")
			}
			if get, err = attrGetter(rest[0], nil, false); err != nil {
				return nil, err
			}
			rest = rest[1:]
		}
		test := func(x any) (bool, error) { return truth(x), nil }
		if len(rest) > 0 {
			tname, ok := rest[0].(string)
			if !ok {
				return nil, rtErr("TypeError", "%s: the test name must be a string", name)
			}
			targs := &args{pos: rest[1:], kwNames: a.kwNames, kw: a.kw}
			test = func(x any) (bool, error) {
				r, err := e.applyTest(tname, x, targs)
				return truth(r), err
			}
		}
		out := []any{}
		for _, it := range items {
			x, err := get(it)
			if err != nil {
				return nil, err
			}
			ok, err := test(x)
			if err != nil {
				return nil, err
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return out, nil
	}
}

func filterReplace(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("replace", []string{"old", "new", "count"}, []any{required, required, nil})
	if err != nil {
		return nil, err
	}
	return e.replace(pyStr(v), pyStr(p[0]), pyStr(p[1]), p[2])
}

func filterReverse(e *evaluator, v any, a *args) (any, error) {
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := e.iter(v)
	if err != nil {
		return nil, rtErr("FilterArgumentError", "argument must be iterable")
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return out, nil
}

func filterRound(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("round", []string{"precision", "method"}, []any{int64(0), "common"})
	if err != nil {
		return nil, err
	}
	prec, err := intArg("round", p[0])
	if err != nil {
		return nil, err
	}
	i, f, isF, ok := num(v)
	if !ok {
		if u, isU := v.(*undefined); isU {
			return nil, u.fail()
		}
		return nil, rtErr("TypeError", "type %s doesn't define __round__ method", typeName(v))
	}
	switch p[1] {
	case "common":
		if !isF {
			if prec >= 0 {
				return i, nil
			}
			return int64(pyRound(float64(i), prec)), nil
		}
		return pyRound(f, prec), nil
	case "ceil", "floor":
		m := math.Pow(10, float64(prec))
		if p[1] == "ceil" {
			return math.Ceil(f*m) / m, nil
		}
		return math.Floor(f*m) / m, nil
	}
	return nil, rtErr("FilterArgumentError", "method must be common, ceil or floor")
}

func filterString(e *evaluator, v any, a *args) (any, error) {
	return pyStr(v), nil
}

func filterSort(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("sort", []string{"reverse", "case_sensitive", "attribute"}, []any{false, false, nil})
	if err != nil {
		return nil, err
	}
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	var get func(any) (any, error)
	if p[2] != nil {
		if get, err = attrGetter(p[2], nil, false); err != nil {
			return nil, err
		}
	}
	out := append([]any{}, items...)
	if err := e.step(len(out)); err != nil {
		return nil, err
	}
	return out, sortValues(out, sortKey(truth(p[1]), get), truth(p[0]))
}

func filterSum(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("sum", []string{"attribute", "start"}, []any{nil, int64(0)})
	if err != nil {
		return nil, err
	}
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	get := func(x any) (any, error) { return x, nil }
	if p[0] != nil {
		if get, err = attrGetter(p[0], nil, false); err != nil {
			return nil, err
		}
	}
	total := p[1]
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		if total, err = e.binary("+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

var wordBeginning = regexp.MustCompile(`([-\s({\[<]+)`)

// filterTitle is Jinja's title filter (not str.title): each word's first
// character upper case, the rest lower.
func filterTitle(e *evaluator, v any, a *args) (any, error) {
	s := pyStr(v)
	var b strings.Builder
	last := 0
	word := func(w string) {
		if w == "" {
			return
		}
		r := []rune(w)
		b.WriteString(pyUpper(string(r[0])) + pyLower(string(r[1:])))
	}
	for _, m := range wordBeginning.FindAllStringIndex(s, -1) {
		word(s[last:m[0]])
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	word(s[last:])
	return b.String(), nil
}

func filterTrim(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("trim", []string{"chars"}, []any{nil})
	if err != nil {
		return nil, err
	}
	chars, err := optChars("strip", p[0])
	if err != nil {
		return nil, err
	}
	return pyStrip(pyStr(v), chars, true, true), nil
}

func filterUnique(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("unique", []string{"case_sensitive", "attribute"}, []any{false, nil})
	if err != nil {
		return nil, err
	}
	items, err := e.iter(v)
	if err != nil {
		return nil, err
	}
	var get func(any) (any, error)
	if p[1] != nil {
		if get, err = attrGetter(p[1], nil, false); err != nil {
			return nil, err
		}
	}
	key := sortKey(truth(p[0]), get)
	var out, seen []any
	for _, it := range items {
		k := key(it)
		dup := false
		for _, s := range seen {
			if pyEq(s, k) {
				dup = true
				break
			}
		}
		if err := e.step(len(seen) / 64); err != nil {
			return nil, err
		}
		if !dup {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return out, nil
}

func filterToJSON(e *evaluator, v any, a *args) (any, error) {
	p, err := a.bind("tojson", []string{"ensure_ascii", "indent", "separators", "sort_keys"}, []any{false, nil, nil, false})
	if err != nil {
		return nil, err
	}
	opts := jsonOpts{ensureASCII: truth(p[0]), sortKeys: truth(p[3]), itemSep: ", ", keySep: ": "}
	switch ind := p[1].(type) {
	case nil:
	case string:
		opts.indent, opts.indented = ind, true
	default:
		n, err := intArg("tojson", ind)
		if err != nil {
			return nil, err
		}
		if n > 1000 {
			return nil, limitErr("tojson indent %d is too wide", n)
		}
		opts.indent, opts.indented = strings.Repeat(" ", int(max(n, 0))), true
		opts.itemSep = ","
	}
	if _, ok := p[1].(string); ok {
		opts.itemSep = ","
	}
	if p[2] != nil {
		seps, err := pyIter(p[2])
		if err != nil || len(seps) != 2 {
			return nil, rtErr("ValueError", "separators must be a pair of strings")
		}
		is, ok1 := seps[0].(string)
		ks, ok2 := seps[1].(string)
		if !ok1 || !ok2 {
			return nil, rtErr("TypeError", "separators must be strings")
		}
		opts.itemSep, opts.keySep = is, ks
	}
	var b strings.Builder
	w := &jsonWriter{opts: opts, b: &b, limit: e.limits.MaxOutput}
	if err := w.value(v, 0); err != nil {
		return nil, err
	}
	if err := e.checkSize(b.Len()); err != nil {
		return nil, err
	}
	return b.String(), nil
}

// Tests.

type testFunc func(e *evaluator, v any, a *args) (bool, error)

var tests map[string]testFunc

func init() {
	cmpTest := func(op string) testFunc {
		return func(e *evaluator, v any, a *args) (bool, error) {
			p, err := a.bind(op, []string{"other"}, []any{required})
			if err != nil {
				return false, err
			}
			return compare(op, v, p[0])
		}
	}
	simple := func(f func(v any) bool) testFunc {
		return func(e *evaluator, v any, a *args) (bool, error) { return f(v), nil }
	}
	tests = map[string]testFunc{
		"defined":   simple(func(v any) bool { _, u := v.(*undefined); return !u }),
		"undefined": simple(func(v any) bool { _, u := v.(*undefined); return u }),
		"none":      simple(func(v any) bool { return v == nil }),
		"boolean":   simple(func(v any) bool { _, ok := v.(bool); return ok }),
		"true":      simple(func(v any) bool { b, ok := v.(bool); return ok && b }),
		"false":     simple(func(v any) bool { b, ok := v.(bool); return ok && !b }),
		"integer": simple(func(v any) bool {
			switch v.(type) {
			case int64, bigInt:
				return true
			}
			return false
		}),
		"float":   simple(func(v any) bool { _, ok := v.(float64); return ok }),
		"number":  simple(isNum),
		"string":  simple(func(v any) bool { _, ok := v.(string); return ok }),
		"mapping": simple(func(v any) bool { _, ok := v.(*dict); return ok }),
		"iterable": simple(func(v any) bool {
			switch v.(type) {
			case string, []any, tuple, *dict, *undefined:
				return true
			}
			return false
		}),
		"sequence": simple(func(v any) bool {
			switch v.(type) {
			case string, []any, tuple, *dict, *undefined:
				return true
			}
			return false
		}),
		"callable": simple(func(v any) bool {
			switch v.(type) {
			case *builtin, *macro, *undefined:
				return true
			}
			return false
		}),
		"escaped": simple(func(v any) bool { return false }),
		"lower": simple(func(v any) bool {
			b, _ := strUnary("islower", pyStr(v)).(bool)
			return b
		}),
		"upper": simple(func(v any) bool {
			b, _ := strUnary("isupper", pyStr(v)).(bool)
			return b
		}),
		"odd":         parityTest(1),
		"even":        parityTest(0),
		"divisibleby": divisibleBy,
		"sameas": func(e *evaluator, v any, a *args) (bool, error) {
			p, err := a.bind("sameas", []string{"other"}, []any{required})
			if err != nil {
				return false, err
			}
			return sameAs(v, p[0]), nil
		},
		"in": func(e *evaluator, v any, a *args) (bool, error) {
			p, err := a.bind("in", []string{"seq"}, []any{required})
			if err != nil {
				return false, err
			}
			return pyContains(p[0], v)
		},
		"eq": cmpTest("=="), "equalto": cmpTest("=="), "==": cmpTest("=="),
		"ne": cmpTest("!="), "!=": cmpTest("!="),
		"lt": cmpTest("<"), "lessthan": cmpTest("<"), "<": cmpTest("<"),
		"le": cmpTest("<="), "<=": cmpTest("<="),
		"gt": cmpTest(">"), "greaterthan": cmpTest(">"), ">": cmpTest(">"),
		"ge": cmpTest(">="), ">=": cmpTest(">="),
	}
}

func parityTest(want int64) testFunc {
	return func(e *evaluator, v any, a *args) (bool, error) {
		m, err := e.binary("%", v, int64(2))
		if err != nil {
			return false, err
		}
		return pyEq(m, want), nil
	}
}

func divisibleBy(e *evaluator, v any, a *args) (bool, error) {
	p, err := a.bind("divisibleby", []string{"num"}, []any{required})
	if err != nil {
		return false, err
	}
	m, err := e.binary("%", v, p[0])
	if err != nil {
		return false, err
	}
	return pyEq(m, int64(0)), nil
}

func sameAs(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case *dict, *namespace, *undefined, *macro, *builtin, *loopContext:
		return a == b
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	}
	return false
}

func (e *evaluator) applyTest(name string, v any, a *args) (any, error) {
	t, ok := tests[name]
	if !ok {
		return nil, rtErr("TemplateRuntimeError", "No test named %s found.", pyRepr(name))
	}
	cost := 1 // a test looks at its value's type, or walks an argument
	for _, x := range a.pos {
		cost += sizeCost(x)
	}
	if err := e.step(cost); err != nil {
		return nil, err
	}
	return t(e, v, a)
}
