package chat

import (
	"math"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// required marks a parameter without a default in bind.
type requiredArg struct{}

var required = requiredArg{}

// bind matches a call's arguments to the named parameters, as Python does,
// filling in defaults.
func (a *args) bind(fname string, names []string, defs []any) ([]any, error) {
	if len(a.pos) > len(names) {
		return nil, rtErr("TypeError", "%s() takes at most %d argument(s) (%d given)", fname, len(names), len(a.pos))
	}
	out := make([]any, len(names))
	set := make([]bool, len(names))
	for i, v := range a.pos {
		out[i], set[i] = v, true
	}
	for i, k := range a.kwNames {
		j := -1
		for n, name := range names {
			if name == k {
				j = n
			}
		}
		if j < 0 {
			return nil, rtErr("TypeError", "%s() got an unexpected keyword argument '%s'", fname, k)
		}
		if set[j] {
			return nil, rtErr("TypeError", "%s() got multiple values for argument '%s'", fname, k)
		}
		out[j], set[j] = a.kw[i], true
	}
	for i := range names {
		if set[i] {
			continue
		}
		if defs[i] == required {
			return nil, rtErr("TypeError", "%s() missing required argument '%s'", fname, names[i])
		}
		out[i] = defs[i]
	}
	return out, nil
}

func method(name string, fn func(e *evaluator, a *args) (any, error)) *builtin {
	return &builtin{name: name, fn: fn}
}

// unsafeMethods are the methods the immutable sandbox refuses: they would
// change a list or dict.
var unsafeMethods = map[string]map[string]bool{
	"list": {"append": true, "extend": true, "insert": true, "pop": true, "remove": true, "reverse": true, "sort": true, "clear": true},
	"dict": {"pop": true, "popitem": true, "setdefault": true, "update": true, "clear": true},
}

func unsafeAttr(obj any, name string) *undefined {
	return &undefined{
		hint:   "access to attribute " + pyRepr(name) + " of " + pyRepr(typeName(obj)) + " object is unsafe.",
		obj:    obj,
		hasObj: true,
		name:   name,
		unsafe: true,
	}
}

// getAttr is the sandbox's getattr(obj, name): a whitelisted method, or
// else the item of that name; Undefined when neither exists.
func getAttr(obj any, name string) (any, error) {
	if u, ok := obj.(*undefined); ok {
		return nil, u.fail()
	}
	if m := boundMethod(obj, name); m != nil {
		return m, nil
	}
	if unsafeMethods[typeName(obj)][name] {
		return unsafeAttr(obj, name), nil
	}
	switch x := obj.(type) {
	case *dict:
		if v, ok := x.get(name); ok {
			return v, nil
		}
	case *namespace:
		if v, ok := x.attrs.get(name); ok {
			return v, nil
		}
	case *loopContext:
		if v, ok := x.attr(name); ok {
			return v, nil
		}
	}
	return undefinedIn(obj, name), nil
}

// getItem is the sandbox's getitem(obj, key): obj[key], else the
// attribute of that name; Undefined when neither exists.
func getItem(obj, key any) (any, error) {
	switch x := obj.(type) {
	case *undefined:
		return nil, x.fail()
	case *dict:
		if k, ok := key.(string); ok {
			if v, ok := x.get(k); ok {
				return v, nil
			}
		}
	case []any, tuple, string:
		if i, _, isF, ok := num(key); ok && !isF {
			if _, big := key.(bigInt); !big {
				if v, ok := index(x, i); ok {
					return v, nil
				}
				return undefinedIn(obj, key), nil
			}
		}
	}
	if k, ok := key.(string); ok {
		return getAttr(obj, k)
	}
	return undefinedIn(obj, key), nil
}

func index(seq any, i int64) (any, bool) {
	switch s := seq.(type) {
	case []any:
		if i < 0 {
			i += int64(len(s))
		}
		if i < 0 || i >= int64(len(s)) {
			return nil, false
		}
		return s[i], true
	case tuple:
		return index([]any(s), i)
	case string:
		if isASCII(s) {
			if i < 0 {
				i += int64(len(s))
			}
			if i < 0 || i >= int64(len(s)) {
				return nil, false
			}
			return s[i : i+1], true
		}
		rs := []rune(s)
		if i < 0 {
			i += int64(len(rs))
		}
		if i < 0 || i >= int64(len(rs)) {
			return nil, false
		}
		return string(rs[i]), true
	}
	return nil, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }

// slice is obj[lo:hi:step] for lists, tuples and strings, with Python's
// index rules; anything else gives Undefined, as Jinja's getitem.
func slice(obj, lo, hi, step any) (any, error) {
	if u, ok := obj.(*undefined); ok {
		return nil, u.fail()
	}
	var n int
	var rs []rune
	switch s := obj.(type) {
	case []any:
		n = len(s)
	case tuple:
		n = len(s)
	case string:
		rs = []rune(s)
		n = len(rs)
	default:
		return &undefined{hint: objectTypeRepr(obj) + " has no element slice(" + pyRepr(lo) + ", " + pyRepr(hi) + ", " + pyRepr(step) + ")"}, nil
	}
	noElement := &undefined{hint: objectTypeRepr(obj) + " has no element slice(" + pyRepr(lo) + ", " + pyRepr(hi) + ", " + pyRepr(step) + ")"}
	// A wrong index type is Python's TypeError, which Jinja's getitem
	// turns into Undefined.
	badIndex := rtErr("TypeError", "slice indices must be integers or None or have an __index__ method")
	idx := func(v any) (int64, bool, error) {
		if v == nil {
			return 0, false, nil
		}
		i, _, isF, ok := num(v)
		if _, big := v.(bigInt); !ok || isF || big {
			return 0, false, badIndex
		}
		return i, true, nil
	}
	st, hasStep, err := idx(step)
	if err != nil {
		return noElement, nil
	}
	if !hasStep {
		st = 1
	}
	if st == 0 {
		return nil, rtErr("ValueError", "slice step cannot be zero")
	}
	l, hasLo, err := idx(lo)
	if err != nil {
		return noElement, nil
	}
	h, hasHi, err := idx(hi)
	if err != nil {
		return noElement, nil
	}
	ln := int64(n)
	adjust := func(i int64, has bool, def int64) int64 {
		if !has {
			return def
		}
		if i < 0 {
			i += ln
			if i < 0 {
				if st < 0 {
					return -1
				}
				return 0
			}
		} else if i >= ln {
			if st < 0 {
				return ln - 1
			}
			return ln
		}
		return i
	}
	var start, stop int64
	if st > 0 {
		start, stop = adjust(l, hasLo, 0), adjust(h, hasHi, ln)
	} else {
		start, stop = adjust(l, hasLo, ln-1), adjust(h, hasHi, -1)
	}
	var picked []int
	for i := start; (st > 0 && i < stop) || (st < 0 && i > stop); i += st {
		picked = append(picked, int(i))
	}
	switch s := obj.(type) {
	case []any:
		out := make([]any, len(picked))
		for k, i := range picked {
			out[k] = s[i]
		}
		return out, nil
	case tuple:
		out := make(tuple, len(picked))
		for k, i := range picked {
			out[k] = s[i]
		}
		return out, nil
	}
	out := make([]rune, len(picked))
	for k, i := range picked {
		out[k] = rs[i]
	}
	return string(out), nil
}

func (l *loopContext) attr(name string) (any, bool) {
	n := int64(len(l.items))
	i := int64(l.index)
	switch name {
	case "index":
		return i + 1, true
	case "index0":
		return i, true
	case "revindex":
		return n - i, true
	case "revindex0":
		return n - i - 1, true
	case "first":
		return i == 0, true
	case "last":
		return i == n-1, true
	case "length":
		return n, true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if i == 0 {
			return &undefined{hint: "there is no previous item"}, true
		}
		return l.items[i-1], true
	case "nextitem":
		if i == n-1 {
			return &undefined{hint: "there is no next item"}, true
		}
		return l.items[i+1], true
	case "cycle":
		return method("cycle", func(e *evaluator, a *args) (any, error) {
			if len(a.pos) == 0 {
				return nil, rtErr("TypeError", "no items for cycling given")
			}
			return a.pos[l.index%len(a.pos)], nil
		}), true
	}
	return nil, false
}

// boundMethod gives the whitelisted method name of obj, or nil.
func boundMethod(obj any, name string) *builtin {
	m := methodOf(obj, name)
	if m != nil {
		m.cost = sizeCost(obj)
	}
	return m
}

func methodOf(obj any, name string) *builtin {
	switch x := obj.(type) {
	case string:
		return strMethod(x, name)
	case *dict:
		return dictMethod(x, name)
	case []any:
		return seqMethod(x, name)
	case tuple:
		return seqMethod(x, name)
	}
	return nil
}

func dictMethod(d *dict, name string) *builtin {
	switch name {
	case "keys":
		return method(name, func(e *evaluator, a *args) (any, error) {
			if _, err := a.bind(name, nil, nil); err != nil {
				return nil, err
			}
			return pyIter(d)
		})
	case "values":
		return method(name, func(e *evaluator, a *args) (any, error) {
			if _, err := a.bind(name, nil, nil); err != nil {
				return nil, err
			}
			out := make([]any, len(d.keys))
			for i, k := range d.keys {
				out[i] = d.m[k]
			}
			return out, nil
		})
	case "items":
		return method(name, func(e *evaluator, a *args) (any, error) {
			if _, err := a.bind(name, nil, nil); err != nil {
				return nil, err
			}
			return dictItems(d), nil
		})
	case "get":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"key", "default"}, []any{required, nil})
			if err != nil {
				return nil, err
			}
			if k, ok := p[0].(string); ok {
				if v, ok := d.get(k); ok {
					return v, nil
				}
			}
			return p[1], nil
		})
	case "copy":
		return method(name, func(e *evaluator, a *args) (any, error) {
			c := newDict(len(d.keys))
			for _, k := range d.keys {
				c.set(k, d.m[k])
			}
			return c, nil
		})
	}
	return nil
}

func dictItems(d *dict) []any {
	out := make([]any, len(d.keys))
	for i, k := range d.keys {
		out[i] = tuple{k, d.m[k]}
	}
	return out
}

func seqMethod(items []any, name string) *builtin {
	switch name {
	case "index":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"value"}, []any{required})
			if err != nil {
				return nil, err
			}
			for i, x := range items {
				if pyEq(x, p[0]) {
					return int64(i), nil
				}
			}
			return nil, rtErr("ValueError", "%s is not in list", pyRepr(p[0]))
		})
	case "count":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"value"}, []any{required})
			if err != nil {
				return nil, err
			}
			n := int64(0)
			for _, x := range items {
				if pyEq(x, p[0]) {
					n++
				}
			}
			return n, nil
		})
	}
	return nil
}

func strArg(fname string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", rtErr("TypeError", "%s() argument must be str, not %s", fname, typeName(v))
	}
	return s, nil
}

// optChars reads the chars argument of strip: None for whitespace.
func optChars(fname string, v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, rtErr("TypeError", "%s arg must be None or str", fname)
	}
	return &s, nil
}

func intArg(fname string, v any) (int64, error) {
	i, _, isF, ok := num(v)
	if !ok || isF {
		return 0, rtErr("TypeError", "'%s' object cannot be interpreted as an integer", typeName(v))
	}
	return i, nil
}

func strMethod(s, name string) *builtin {
	switch name {
	case "startswith", "endswith":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"prefix"}, []any{required})
			if err != nil {
				return nil, err
			}
			var cands []any
			switch x := p[0].(type) {
			case string:
				cands = []any{x}
			case tuple:
				cands = x
			default:
				return nil, rtErr("TypeError", "%s first arg must be str or a tuple of str, not %s", name, typeName(p[0]))
			}
			for _, c := range cands {
				cs, ok := c.(string)
				if !ok {
					return nil, rtErr("TypeError", "tuple for %s must only contain str, not %s", name, typeName(c))
				}
				if name == "startswith" && strings.HasPrefix(s, cs) || name == "endswith" && strings.HasSuffix(s, cs) {
					return true, nil
				}
			}
			return false, nil
		})
	case "strip", "lstrip", "rstrip":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"chars"}, []any{nil})
			if err != nil {
				return nil, err
			}
			chars, err := optChars(name, p[0])
			if err != nil {
				return nil, err
			}
			return pyStrip(s, chars, name != "rstrip", name != "lstrip"), nil
		})
	case "split", "rsplit":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"sep", "maxsplit"}, []any{nil, int64(-1)})
			if err != nil {
				return nil, err
			}
			maxsplit, err := intArg(name, p[1])
			if err != nil {
				return nil, err
			}
			if p[0] == nil {
				if err := e.checkItems(countFields(s)); err != nil {
					return nil, err
				}
				return pySplitSpace(s, int(maxsplit), name == "rsplit"), nil
			}
			sep, err := strArg(name, p[0])
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, rtErr("ValueError", "empty separator")
			}
			if err := e.checkItems(strings.Count(s, sep) + 1); err != nil {
				return nil, err
			}
			var parts []string
			switch {
			case maxsplit < 0:
				parts = strings.Split(s, sep)
			case name == "split":
				parts = strings.SplitN(s, sep, int(min(maxsplit, int64(len(s))))+1)
			default:
				parts = rsplitN(s, sep, int(min(maxsplit, int64(len(s)))))
			}
			return strList(parts), nil
		})
	case "splitlines":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"keepends"}, []any{false})
			if err != nil {
				return nil, err
			}
			if err := e.checkItems(strings.Count(s, "\n") + 1); err != nil {
				return nil, err
			}
			return strList(splitLines(s, truth(p[0]))), nil
		})
	case "lower", "upper", "title", "capitalize", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper":
		return method(name, func(e *evaluator, a *args) (any, error) {
			if _, err := a.bind(name, nil, nil); err != nil {
				return nil, err
			}
			return strUnary(name, s), nil
		})
	case "replace":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"old", "new", "count"}, []any{required, required, int64(-1)})
			if err != nil {
				return nil, err
			}
			return e.replace(s, p[0], p[1], p[2])
		})
	case "find", "rfind", "count":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"sub"}, []any{required})
			if err != nil {
				return nil, err
			}
			sub, err := strArg(name, p[0])
			if err != nil {
				return nil, err
			}
			switch name {
			case "count":
				if sub == "" {
					return int64(runeCount(s) + 1), nil
				}
				return int64(strings.Count(s, sub)), nil
			case "find":
				i := strings.Index(s, sub)
				if i < 0 {
					return int64(-1), nil
				}
				return int64(runeCount(s[:i])), nil
			}
			i := strings.LastIndex(s, sub)
			if i < 0 {
				return int64(-1), nil
			}
			return int64(runeCount(s[:i])), nil
		})
	case "join":
		return method(name, func(e *evaluator, a *args) (any, error) {
			p, err := a.bind(name, []string{"iterable"}, []any{required})
			if err != nil {
				return nil, err
			}
			items, err := e.iter(p[0])
			if err != nil {
				return nil, rtErr("TypeError", "can only join an iterable")
			}
			parts := make([]string, len(items))
			size := 0
			for i, it := range items {
				str, ok := it.(string)
				if !ok {
					return nil, rtErr("TypeError", "sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = str
				size += len(str) + len(s)
			}
			if err := e.checkSize(size); err != nil {
				return nil, err
			}
			return strings.Join(parts, s), nil
		})
	}
	return nil
}

// countFields counts the whitespace-separated words of s.
func countFields(s string) int {
	n, in := 0, false
	for _, r := range s {
		sp := isPySpace(r)
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

func strList(parts []string) []any {
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out
}

func rsplitN(s, sep string, n int) []string {
	var rev []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
		n--
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// pyStrip is str.strip/lstrip/rstrip: whitespace when chars is nil.
func pyStrip(s string, chars *string, left, right bool) string {
	cut := isPySpace
	if chars != nil {
		set := *chars
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pySplitSpace is str.split()/rsplit() without a separator.
func pySplitSpace(s string, maxsplit int, fromRight bool) []any {
	fields := strings.FieldsFunc(s, isPySpace)
	if maxsplit < 0 || len(fields) <= maxsplit+1 {
		return strList(fields)
	}
	if !fromRight {
		// the rest after maxsplit words keeps its inner whitespace
		rest := s
		var out []string
		for k := 0; k < maxsplit; k++ {
			rest = strings.TrimLeftFunc(rest, isPySpace)
			i := strings.IndexFunc(rest, isPySpace)
			out = append(out, rest[:i])
			rest = rest[i:]
		}
		return strList(append(out, strings.TrimLeftFunc(rest, isPySpace)))
	}
	rest := s
	var rev []string
	for k := 0; k < maxsplit; k++ {
		rest = strings.TrimRightFunc(rest, isPySpace)
		i := strings.LastIndexFunc(rest, isPySpace)
		_, n := utf8.DecodeRuneInString(rest[i:])
		rev = append(rev, rest[i+n:])
		rest = rest[:i]
	}
	out := []string{strings.TrimRightFunc(rest, isPySpace)}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return strList(out)
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// splitLines is str.splitlines.
func splitLines(s string, keepends bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += n
			continue
		}
		end := i + n
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start, i = end, end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// Python's str case methods use the full Unicode case mappings ("ß"
// upper-cases to "SS"), as golang.org/x/text/cases does. A Caser is not
// safe for concurrent use: each call makes its own.
func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return cases.Upper(language.Und).String(s)
}

func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Lower(language.Und).String(s)
}

// titleRune is r's full title-case mapping ("ß" gives "Ss").
func titleRune(r rune) string {
	if r < utf8.RuneSelf {
		return string(unicode.ToUpper(r))
	}
	return cases.Title(language.Und, cases.NoLower).String(string(r))
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

func strUnary(name, s string) any {
	switch name {
	case "lower":
		return pyLower(s)
	case "upper":
		return pyUpper(s)
	case "title":
		var b strings.Builder
		prevCased := false
		for _, r := range s {
			if prevCased {
				b.WriteString(pyLower(string(r)))
			} else {
				b.WriteString(titleRune(r))
			}
			prevCased = isCased(r)
		}
		return b.String()
	case "capitalize":
		r, n := utf8.DecodeRuneInString(s)
		if n == 0 {
			return s
		}
		return titleRune(r) + pyLower(s[n:])
	}
	if s == "" {
		return false
	}
	var pred func(rune) bool
	switch name {
	case "isdigit":
		pred = unicode.IsDigit
	case "isalpha":
		pred = unicode.IsLetter
	case "isalnum":
		pred = func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }
	case "isspace":
		pred = isPySpace
	case "islower", "isupper":
		cased := false
		for _, r := range s {
			if unicode.IsUpper(r) || unicode.IsTitle(r) {
				if name == "islower" {
					return false
				}
				cased = true
			} else if unicode.IsLower(r) {
				if name == "isupper" {
					return false
				}
				cased = true
			}
		}
		return cased
	}
	for _, r := range s {
		if !pred(r) {
			return false
		}
	}
	return true
}

func (e *evaluator) replace(s string, oldV, newV, countV any) (any, error) {
	old, err := strArg("replace", oldV)
	if err != nil {
		return nil, err
	}
	repl, err := strArg("replace", newV)
	if err != nil {
		return nil, err
	}
	count := int64(-1)
	if countV != nil {
		if count, err = intArg("replace", countV); err != nil {
			return nil, err
		}
	}
	n := strings.Count(s, old)
	if old == "" {
		n = runeCount(s) + 1
	}
	if count >= 0 && int64(n) > count {
		n = int(count)
	}
	if err := e.checkSize(len(s) + n*(len(repl)-len(old))); err != nil {
		return nil, err
	}
	if count < 0 {
		return strings.ReplaceAll(s, old, repl), nil
	}
	return strings.Replace(s, old, repl, int(count)), nil
}

func formatInt(i int64) string { return strconv.FormatInt(i, 10) }

func parseFloatLoose(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// globals are the functions every template sees (a variable of the same
// name hides one).
var globals map[string]any

func init() {
	globals = map[string]any{
		"range":           &builtin{name: "range", fn: builtinRange},
		"namespace":       &builtin{name: "namespace", fn: builtinNamespace},
		"dict":            &builtin{name: "dict", fn: builtinDict},
		"raise_exception": &builtin{name: "raise_exception", fn: builtinRaise},
		"strftime_now":    &builtin{name: "strftime_now", fn: builtinStrftimeNow},
	}
}

// maxRange is Jinja's sandbox MAX_RANGE.
const maxRange = 100000

func builtinRange(e *evaluator, a *args) (any, error) {
	if len(a.kw) > 0 {
		return nil, rtErr("TypeError", "range() takes no keyword arguments")
	}
	var bounds []int64
	for _, v := range a.pos {
		i, err := intArg("range", v)
		if err != nil {
			return nil, err
		}
		bounds = append(bounds, i)
	}
	start, stop, st := int64(0), int64(0), int64(1)
	switch len(bounds) {
	case 1:
		stop = bounds[0]
	case 2:
		start, stop = bounds[0], bounds[1]
	case 3:
		start, stop, st = bounds[0], bounds[1], bounds[2]
	default:
		return nil, rtErr("TypeError", "range expected at most 3 arguments, got %d", len(bounds))
	}
	if st == 0 {
		return nil, rtErr("ValueError", "range() arg 3 must not be zero")
	}
	var n int64
	if st > 0 && stop > start {
		n = (stop - start + st - 1) / st
	} else if st < 0 && stop < start {
		n = (start - stop - st - 1) / -st
	}
	if n > maxRange || n < 0 {
		return nil, rtErr("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}
	if err := e.checkItems(int(n)); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		out[i] = start + int64(i)*st
	}
	return out, nil
}

func builtinNamespace(e *evaluator, a *args) (any, error) {
	d := newDict(len(a.kw))
	for _, p := range a.pos {
		src, ok := p.(*dict)
		if !ok {
			return nil, rtErr("TypeError", "namespace() takes mappings as positional arguments, not %s", typeName(p))
		}
		for _, k := range src.keys {
			d.set(k, src.m[k])
		}
	}
	for i, k := range a.kwNames {
		d.set(k, a.kw[i])
	}
	return &namespace{attrs: d}, nil
}

func builtinDict(e *evaluator, a *args) (any, error) {
	d := newDict(len(a.kw))
	for _, p := range a.pos {
		src, ok := p.(*dict)
		if !ok {
			return nil, rtErr("TypeError", "dict() takes a mapping as positional argument, not %s", typeName(p))
		}
		for _, k := range src.keys {
			d.set(k, src.m[k])
		}
	}
	for i, k := range a.kwNames {
		d.set(k, a.kw[i])
	}
	return d, nil
}

func builtinRaise(e *evaluator, a *args) (any, error) {
	p, err := a.bind("raise_exception", []string{"message"}, []any{required})
	if err != nil {
		return nil, err
	}
	return nil, &TemplateError{Message: pyStr(p[0])}
}

func builtinStrftimeNow(e *evaluator, a *args) (any, error) {
	p, err := a.bind("strftime_now", []string{"format"}, []any{required})
	if err != nil {
		return nil, err
	}
	f, err := strArg("strftime_now", p[0])
	if err != nil {
		return nil, err
	}
	return strftime(e.now(), f), nil
}

// sortValues sorts items stably in Python's order (by key when given).
func sortValues(items []any, key func(any) any, reverse bool) error {
	var err error
	sort.SliceStable(items, func(i, j int) bool {
		if err != nil {
			return false
		}
		a, b := key(items[i]), key(items[j])
		if reverse {
			a, b = b, a
		}
		c, e := pyCompare("<", a, b)
		if e != nil {
			err = e
		}
		return c < 0
	})
	return err
}

// pyRound is Python's round(x, digits) for a float: half to even on the
// exact binary value.
func pyRound(x float64, digits int64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	if digits >= 0 {
		if digits > 340 {
			return x
		}
		f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', int(digits), 64), 64)
		return f
	}
	p := math.Pow(10, float64(-digits))
	return math.RoundToEven(x/p) * p
}
