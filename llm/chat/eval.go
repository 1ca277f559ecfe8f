package chat

import (
	"math"
	"strings"
	"time"
)

type ctrl int

const (
	ctrlNone ctrl = iota
	ctrlBreak
	ctrlContinue
)

// frame is a scope: the template's top level, a loop, a macro call.
type frame struct {
	vars   map[string]any
	parent *frame
}

func newFrame(parent *frame) *frame { return &frame{vars: map[string]any{}, parent: parent} }

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// evaluator runs one rendering.
type evaluator struct {
	t      *Template
	limits Limits
	out    *strings.Builder
	steps  int
	depth  int
	now    func() time.Time
}

// loopContext is the loop variable of a for loop.
type loopContext struct {
	items []any
	index int
}

// macro is a macro defined by the template, closed over its scope.
type macro struct {
	node    *macroNode
	closure *frame
}

// builtin is a Go function callable from the template: a global, or a
// method bound to its receiver.
type builtin struct {
	name string
	fn   func(e *evaluator, a *args) (any, error)
	cost int // steps charged per call beyond one: the receiver's size
}

// args are a call's evaluated arguments.
type args struct {
	pos     []any
	kwNames []string
	kw      []any
}

func (e *evaluator) step(n int) error {
	e.steps += n
	if e.steps > e.limits.MaxSteps {
		return limitErr("the template ran more than %d steps", e.limits.MaxSteps)
	}
	return nil
}

// checkSize fails when a value being built would exceed the output limit.
func (e *evaluator) checkSize(n int) error {
	if n > e.limits.MaxOutput {
		return limitErr("a value of the template grew beyond %d bytes", e.limits.MaxOutput)
	}
	return e.step(n >> 7)
}

// checkItems is checkSize for a list of n items: at most MaxOutput/16
// items, one step per 4.
func (e *evaluator) checkItems(n int) error {
	if n > e.limits.MaxOutput/16 {
		return limitErr("a list of the template grew beyond %d items", e.limits.MaxOutput/16)
	}
	return e.step(n >> 2)
}

// sizeCost is the steps charged for walking over v: one per 256 bytes of
// a string, one per 4 items of a list or dict.
func sizeCost(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) >> 8
	case []any:
		return len(x) >> 2
	case tuple:
		return len(x) >> 2
	case *dict:
		return len(x.keys) >> 2
	}
	return 0
}

func (e *evaluator) write(s string) error {
	if e.out.Len()+len(s) > e.limits.MaxOutput {
		return limitErr("the output grew beyond %d bytes", e.limits.MaxOutput)
	}
	e.out.WriteString(s)
	return e.step(len(s) >> 7)
}

// at gives an error without a position the line of pos.
func (e *evaluator) at(err error, pos int) error {
	if re, ok := err.(*RenderError); ok && re.Line == 0 {
		re.Line, _ = lineCol(e.t.src, pos)
	}
	return err
}

func (e *evaluator) exec(body []node, f *frame) (ctrl, error) {
	for _, n := range body {
		if err := e.step(1); err != nil {
			return ctrlNone, err
		}
		switch n := n.(type) {
		case *textNode:
			if err := e.write(n.s); err != nil {
				return ctrlNone, err
			}
		case *outputNode:
			v, err := e.eval(n.x, f)
			if err != nil {
				return ctrlNone, e.at(err, n.pos)
			}
			if err := e.write(pyStr(v)); err != nil {
				return ctrlNone, err
			}
		case *ifNode:
			done := false
			for i, c := range n.conds {
				v, err := e.eval(c, f)
				if err != nil {
					return ctrlNone, e.at(err, n.pos)
				}
				if truth(v) {
					done = true
					if c, err := e.exec(n.bodies[i], f); c != ctrlNone || err != nil {
						return c, err
					}
					break
				}
			}
			if !done && n.els != nil {
				if c, err := e.exec(n.els, f); c != ctrlNone || err != nil {
					return c, err
				}
			}
		case *forNode:
			if err := e.execFor(n, f); err != nil {
				return ctrlNone, e.at(err, n.pos)
			}
		case *setNode:
			if err := e.execSet(n, f); err != nil {
				return ctrlNone, e.at(err, n.pos)
			}
		case *macroNode:
			f.vars[n.name] = &macro{node: n, closure: f}
		case *breakNode:
			return ctrlBreak, nil
		case *continueNode:
			return ctrlContinue, nil
		case *groupNode:
			if c, err := e.exec(n.body, f); c != ctrlNone || err != nil {
				return c, err
			}
		}
	}
	return ctrlNone, nil
}

func (e *evaluator) assign(t target, v any, f *frame) error {
	if !t.tuple {
		f.vars[t.names[0]] = v
		return nil
	}
	if n, err := pyLen(v); err == nil && n != len(t.names) {
		if n < len(t.names) {
			return rtErr("ValueError", "not enough values to unpack (expected %d, got %d)", len(t.names), n)
		}
		return rtErr("ValueError", "too many values to unpack (expected %d)", len(t.names))
	}
	items, err := pyIter(v)
	if err != nil {
		return err
	}
	if len(items) < len(t.names) {
		return rtErr("ValueError", "not enough values to unpack (expected %d, got %d)", len(t.names), len(items))
	}
	if len(items) > len(t.names) {
		return rtErr("ValueError", "too many values to unpack (expected %d)", len(t.names))
	}
	for i, name := range t.names {
		f.vars[name] = items[i]
	}
	return nil
}

func (e *evaluator) execSet(n *setNode, f *frame) error {
	var v any
	if n.x != nil {
		var err error
		if v, err = e.eval(n.x, f); err != nil {
			return err
		}
	} else {
		s, err := e.capture(n.body, f)
		if err != nil {
			return err
		}
		v = s
	}
	if n.target.attr != "" {
		obj, _ := f.lookup(n.target.names[0])
		ns, ok := obj.(*namespace)
		if !ok {
			return rtErr("TemplateRuntimeError", "cannot assign attribute on non-namespace object")
		}
		ns.attrs.set(n.target.attr, v)
		return nil
	}
	return e.assign(n.target, v, f)
}

// capture renders body into a string of its own.
func (e *evaluator) capture(body []node, f *frame) (string, error) {
	saved := e.out
	var b strings.Builder
	e.out = &b
	_, err := e.exec(body, f)
	e.out = saved
	return b.String(), err
}

func (e *evaluator) execFor(n *forNode, f *frame) error {
	iter, err := e.eval(n.iter, f)
	if err != nil {
		return err
	}
	items, err := e.iter(iter)
	if err != nil {
		return err
	}
	lf := newFrame(f)
	if n.cond != nil {
		kept := make([]any, 0, len(items))
		for _, it := range items {
			if err := e.step(1); err != nil {
				return err
			}
			if err := e.assign(n.target, it, lf); err != nil {
				return err
			}
			c, err := e.eval(n.cond, lf)
			if err != nil {
				return err
			}
			if truth(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if n.els != nil {
			_, err := e.exec(n.els, lf)
			return err
		}
		return nil
	}
	for i, it := range items {
		if err := e.step(1); err != nil {
			return err
		}
		// Each iteration has its own scope: what the body sets does not
		// reach the next iteration (hence namespace()).
		itf := newFrame(f)
		if err := e.assign(n.target, it, itf); err != nil {
			return err
		}
		itf.vars["loop"] = &loopContext{items: items, index: i}
		c, err := e.exec(n.body, itf)
		if err != nil {
			return err
		}
		if c == ctrlBreak {
			break
		}
	}
	return nil
}

func (e *evaluator) evalArgs(a callArgs, f *frame) (*args, error) {
	out := &args{kwNames: a.kwNames}
	for _, x := range a.pos {
		v, err := e.eval(x, f)
		if err != nil {
			return nil, err
		}
		out.pos = append(out.pos, v)
	}
	for _, x := range a.kw {
		v, err := e.eval(x, f)
		if err != nil {
			return nil, err
		}
		out.kw = append(out.kw, v)
	}
	return out, nil
}

func (e *evaluator) eval(x expr, f *frame) (any, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := f.lookup(x.name); ok {
			return v, nil
		}
		return undefinedName(x.name), nil
	case *listExpr:
		out := make([]any, len(x.items))
		for i, it := range x.items {
			v, err := e.eval(it, f)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *tupleExpr:
		out := make(tuple, len(x.items))
		for i, it := range x.items {
			v, err := e.eval(it, f)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *dictExpr:
		d := newDict(len(x.keys))
		for i := range x.keys {
			k, err := e.eval(x.keys[i], f)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, rtErr("TypeError", "only string keys are supported in dict literals, not %s", typeName(k))
			}
			v, err := e.eval(x.vals[i], f)
			if err != nil {
				return nil, err
			}
			d.set(ks, v)
		}
		return d, nil
	case *attrExpr:
		obj, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, x.name)
	case *itemExpr:
		obj, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		key, err := e.eval(x.key, f)
		if err != nil {
			return nil, err
		}
		if s, ok := obj.(string); ok && !isASCII(s) {
			if err := e.step(sizeCost(s)); err != nil {
				return nil, err
			}
		}
		return getItem(obj, key)
	case *sliceExpr:
		return e.evalSlice(x, f)
	case *callExpr:
		fn, err := e.eval(x.fn, f)
		if err != nil {
			return nil, err
		}
		a, err := e.evalArgs(x.args, f)
		if err != nil {
			return nil, err
		}
		return e.call(fn, a)
	case *filterExpr:
		v, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		a, err := e.evalArgs(x.args, f)
		if err != nil {
			return nil, err
		}
		return e.applyFilter(x.name, v, a)
	case *testExpr:
		v, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		a, err := e.evalArgs(x.args, f)
		if err != nil {
			return nil, err
		}
		return e.applyTest(x.name, v, a)
	case *notExpr:
		v, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		return !truth(v), nil
	case *unaryExpr:
		v, err := e.eval(x.x, f)
		if err != nil {
			return nil, err
		}
		return unary(x.op, v)
	case *andExpr:
		l, err := e.eval(x.l, f)
		if err != nil || !truth(l) {
			return l, err
		}
		return e.eval(x.r, f)
	case *orExpr:
		l, err := e.eval(x.l, f)
		if err != nil || truth(l) {
			return l, err
		}
		return e.eval(x.r, f)
	case *binExpr:
		l, err := e.eval(x.l, f)
		if err != nil {
			return nil, err
		}
		r, err := e.eval(x.r, f)
		if err != nil {
			return nil, err
		}
		return e.binary(x.op, l, r)
	case *cmpExpr:
		l, err := e.eval(x.first, f)
		if err != nil {
			return nil, err
		}
		for i, op := range x.ops {
			r, err := e.eval(x.rest[i], f)
			if err != nil {
				return nil, err
			}
			if err := e.step(sizeCost(l) + sizeCost(r)); err != nil {
				return nil, err
			}
			ok, err := compare(op, l, r)
			if err != nil || !ok {
				return false, err
			}
			l = r
		}
		return true, nil
	case *condExpr:
		c, err := e.eval(x.cond, f)
		if err != nil {
			return nil, err
		}
		if truth(c) {
			return e.eval(x.then, f)
		}
		if x.els == nil {
			line, _ := lineCol(e.t.src, x.pos)
			return &undefined{hint: "the inline if-expression on line " + itoa(line) + " evaluated to false and no else section was defined."}, nil
		}
		return e.eval(x.els, f)
	}
	return nil, rtErr("TemplateRuntimeError", "unknown expression %T", x)
}

func (e *evaluator) evalSlice(x *sliceExpr, f *frame) (any, error) {
	obj, err := e.eval(x.x, f)
	if err != nil {
		return nil, err
	}
	if err := e.step(sizeCost(obj)); err != nil {
		return nil, err
	}
	var bounds [3]any
	for i, b := range []expr{x.lo, x.hi, x.step} {
		if b == nil {
			continue
		}
		if bounds[i], err = e.eval(b, f); err != nil {
			return nil, err
		}
	}
	return slice(obj, bounds[0], bounds[1], bounds[2])
}

func (e *evaluator) call(fn any, a *args) (any, error) {
	switch fn := fn.(type) {
	case *builtin:
		cost := 1 + fn.cost
		for _, v := range a.pos {
			cost += sizeCost(v)
		}
		if err := e.step(cost); err != nil {
			return nil, err
		}
		return fn.fn(e, a)
	case *macro:
		return e.callMacro(fn, a)
	case *undefined:
		return nil, fn.fail()
	}
	return nil, rtErr("TypeError", "'%s' object is not callable", typeName(fn))
}

func (e *evaluator) callMacro(m *macro, a *args) (any, error) {
	n := m.node
	if e.depth >= e.limits.MaxDepth {
		return nil, limitErr("macro calls nested deeper than %d", e.limits.MaxDepth)
	}
	e.depth++
	defer func() { e.depth-- }()
	if len(a.pos) > len(n.params) {
		return nil, rtErr("TypeError", "macro '%s' takes not more than %d argument(s)", n.name, len(n.params))
	}
	f := newFrame(m.closure)
	set := make([]bool, len(n.params))
	for i, v := range a.pos {
		f.vars[n.params[i]] = v
		set[i] = true
	}
	for i, name := range a.kwNames {
		found := false
		for j, p := range n.params {
			if p == name {
				if set[j] {
					return nil, rtErr("TypeError", "macro '%s' got multiple values for argument '%s'", n.name, name)
				}
				f.vars[p] = a.kw[i]
				set[j] = true
				found = true
			}
		}
		if !found {
			return nil, rtErr("TypeError", "macro '%s' takes no keyword argument '%s'", n.name, name)
		}
	}
	for i, p := range n.params {
		if set[i] {
			continue
		}
		if n.defaults[i] == nil {
			f.vars[p] = &undefined{hint: "parameter " + pyRepr(p) + " was not provided"}
			continue
		}
		v, err := e.eval(n.defaults[i], f)
		if err != nil {
			return nil, err
		}
		f.vars[p] = v
	}
	return e.capture(n.body, f)
}

func itoa(i int) string { return formatInt(int64(i)) }

// iter is pyIter charging a string's length first: it becomes one string
// per character.
func (e *evaluator) iter(v any) ([]any, error) {
	if s, ok := v.(string); ok {
		if err := e.step(len(s)); err != nil {
			return nil, err
		}
	}
	return pyIter(v)
}

// pyIter lists what Python's iter(v) yields.
func pyIter(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case tuple:
		return x, nil
	case *dict:
		out := make([]any, len(x.keys))
		for i, k := range x.keys {
			out[i] = k
		}
		return out, nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case *undefined:
		if x.unsafe {
			return nil, x.fail()
		}
		return nil, nil
	}
	return nil, rtErr("TypeError", "'%s' object is not iterable", typeName(v))
}

// pyLen is Python's len(v) (0 for Undefined, as Jinja's).
func pyLen(v any) (int, error) {
	switch x := v.(type) {
	case string:
		return runeCount(x), nil
	case []any:
		return len(x), nil
	case tuple:
		return len(x), nil
	case *dict:
		return len(x.keys), nil
	case *undefined:
		return 0, nil
	}
	return 0, rtErr("TypeError", "object of type '%s' has no len()", typeName(v))
}

// num reads a number (bool counts, as in Python).
func num(v any) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	case bigInt:
		fl := parseFloatLoose(x.s)
		return 0, fl, true, true
	}
	return 0, 0, false, false
}

func isNum(v any) bool {
	_, _, _, ok := num(v)
	return ok
}

func unary(op string, v any) (any, error) {
	if u, ok := v.(*undefined); ok {
		return nil, u.fail()
	}
	i, fl, isF, ok := num(v)
	if !ok {
		return nil, rtErr("TypeError", "bad operand type for unary %s: '%s'", op, typeName(v))
	}
	if op == "+" {
		if isF {
			return fl, nil
		}
		return i, nil
	}
	if isF {
		return -fl, nil
	}
	if i == math.MinInt64 {
		return -fl, nil
	}
	return -i, nil
}

func (e *evaluator) binary(op string, l, r any) (any, error) {
	if op == "~" {
		ls, rs := pyStr(l), pyStr(r)
		if err := e.checkSize(len(ls) + len(rs)); err != nil {
			return nil, err
		}
		return ls + rs, nil
	}
	if u, ok := l.(*undefined); ok {
		return nil, u.fail()
	}
	if u, ok := r.(*undefined); ok {
		return nil, u.fail()
	}
	li, lf, lfl, lok := num(l)
	ri, rf, rfl, rok := num(r)
	if lok && rok {
		return arith(op, li, lf, lfl, ri, rf, rfl)
	}
	unsupported := func() error {
		return rtErr("TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
	}
	switch op {
	case "+":
		switch lv := l.(type) {
		case string:
			rv, ok := r.(string)
			if !ok {
				return nil, rtErr("TypeError", "can only concatenate str (not \"%s\") to str", typeName(r))
			}
			if err := e.checkSize(len(lv) + len(rv)); err != nil {
				return nil, err
			}
			return lv + rv, nil
		case []any:
			rv, ok := r.([]any)
			if !ok {
				return nil, rtErr("TypeError", "can only concatenate list (not \"%s\") to list", typeName(r))
			}
			if err := e.checkItems(len(lv) + len(rv)); err != nil {
				return nil, err
			}
			out := make([]any, 0, len(lv)+len(rv))
			return append(append(out, lv...), rv...), nil
		case tuple:
			rv, ok := r.(tuple)
			if !ok {
				return nil, rtErr("TypeError", "can only concatenate tuple (not \"%s\") to tuple", typeName(r))
			}
			if err := e.checkItems(len(lv) + len(rv)); err != nil {
				return nil, err
			}
			out := make(tuple, 0, len(lv)+len(rv))
			return append(append(out, lv...), rv...), nil
		}
		return nil, unsupported()
	case "*":
		seq, n := l, r
		if lok {
			seq, n = r, l
		}
		count, _, isF, ok := num(n)
		if !ok || isF {
			if _, isStr := seq.(string); isStr || isSeq(seq) {
				return nil, rtErr("TypeError", "can't multiply sequence by non-int of type '%s'", typeName(n))
			}
			return nil, unsupported()
		}
		if count < 0 {
			count = 0
		}
		switch s := seq.(type) {
		case string:
			if count > 0 && int64(len(s)) > int64(e.limits.MaxOutput)/count {
				return nil, e.checkSize(e.limits.MaxOutput + 1)
			}
			if err := e.checkSize(len(s) * int(count)); err != nil {
				return nil, err
			}
			return strings.Repeat(s, int(count)), nil
		case []any, tuple:
			items, _ := pyIter(s)
			if count > 0 && int64(len(items)) > int64(e.limits.MaxOutput)/count {
				return nil, e.checkItems(e.limits.MaxOutput)
			}
			if err := e.checkItems(len(items) * int(count)); err != nil {
				return nil, err
			}
			out := make([]any, 0, len(items)*int(count))
			for k := int64(0); k < count; k++ {
				out = append(out, items...)
			}
			if _, isTuple := s.(tuple); isTuple {
				return tuple(out), nil
			}
			return out, nil
		}
		return nil, unsupported()
	case "%":
		if _, ok := l.(string); ok {
			return nil, rtErr("TypeError", "printf-style string formatting is not supported")
		}
	}
	return nil, unsupported()
}

func isSeq(v any) bool {
	switch v.(type) {
	case []any, tuple:
		return true
	}
	return false
}

func arith(op string, li int64, lf float64, lfl bool, ri int64, rf float64, rfl bool) (any, error) {
	isF := lfl || rfl
	switch op {
	case "+":
		if !isF {
			s := li + ri
			if (s > li) == (ri > 0) {
				return s, nil
			}
		}
		return lf + rf, nil
	case "-":
		if !isF {
			s := li - ri
			if (s < li) == (ri > 0) {
				return s, nil
			}
		}
		return lf - rf, nil
	case "*":
		if !isF {
			if p, ok := mulOK(li, ri); ok {
				return p, nil
			}
		}
		return lf * rf, nil
	case "/":
		if rf == 0 {
			if isF {
				return nil, rtErr("ZeroDivisionError", "float division by zero")
			}
			return nil, rtErr("ZeroDivisionError", "division by zero")
		}
		return lf / rf, nil
	case "//":
		if rf == 0 {
			if isF {
				return nil, rtErr("ZeroDivisionError", "float floor division by zero")
			}
			return nil, rtErr("ZeroDivisionError", "integer division or modulo by zero")
		}
		if !isF {
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		}
		return math.Floor(lf / rf), nil
	case "%":
		if rf == 0 {
			if isF {
				return nil, rtErr("ZeroDivisionError", "float modulo")
			}
			return nil, rtErr("ZeroDivisionError", "integer modulo by zero")
		}
		if !isF {
			m := li % ri
			if m != 0 && ((m < 0) != (ri < 0)) {
				m += ri
			}
			return m, nil
		}
		m := math.Mod(lf, rf)
		if m != 0 && ((m < 0) != (rf < 0)) {
			m += rf
		}
		return m, nil
	case "**":
		if !isF && ri >= 0 {
			if p, ok := intPow(li, ri); ok {
				return p, nil
			}
			return math.Pow(lf, rf), nil
		}
		if lf == 0 && rf < 0 {
			return nil, rtErr("ZeroDivisionError", "0.0 cannot be raised to a negative power")
		}
		return math.Pow(lf, rf), nil
	}
	return nil, rtErr("TypeError", "unsupported operator %s", op)
}

// pyEq is Python's ==.
func pyEq(a, b any) bool {
	return pyEqDepth(a, b, 0)
}

func pyEqDepth(a, b any, depth int) bool {
	if depth > maxReprDepth {
		return false
	}
	if ai, af, aF, ok := num(a); ok {
		bi, bf, bF, ok := num(b)
		if !ok {
			return false
		}
		if !aF && !bF {
			return ai == bi
		}
		return af == bf
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && seqEq(x, y, depth)
	case tuple:
		y, ok := b.(tuple)
		return ok && seqEq(x, y, depth)
	case *dict:
		y, ok := b.(*dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.m[k]
			if !ok || !pyEqDepth(x.m[k], yv, depth+1) {
				return false
			}
		}
		return true
	case *undefined:
		_, ok := b.(*undefined)
		return ok
	}
	return a == b
}

func seqEq(x, y []any, depth int) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !pyEqDepth(x[i], y[i], depth+1) {
			return false
		}
	}
	return true
}

// pyCompare orders a and b as Python's <, or fails as Python does.
func pyCompare(op string, a, b any) (int, error) {
	if u, ok := a.(*undefined); ok {
		return 0, u.fail()
	}
	if u, ok := b.(*undefined); ok {
		return 0, u.fail()
	}
	if ai, af, aF, ok := num(a); ok {
		if bi, bf, bF, ok := num(b); ok {
			if !aF && !bF {
				return cmp3(ai < bi, ai > bi), nil
			}
			return cmp3(af < bf, af > bf), nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case []any:
		if y, ok := b.([]any); ok {
			return seqCompare(op, x, y)
		}
	case tuple:
		if y, ok := b.(tuple); ok {
			return seqCompare(op, x, y)
		}
	}
	return 0, rtErr("TypeError", "'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

func seqCompare(op string, x, y []any) (int, error) {
	for i := 0; i < len(x) && i < len(y); i++ {
		if pyEq(x[i], y[i]) {
			continue
		}
		return pyCompare(op, x[i], y[i])
	}
	return cmp3(len(x) < len(y), len(x) > len(y)), nil
}

func compare(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return pyEq(l, r), nil
	case "!=":
		return !pyEq(l, r), nil
	case "in":
		return pyContains(r, l)
	case "notin":
		ok, err := pyContains(r, l)
		return !ok, err
	}
	c, err := pyCompare(op, l, r)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// pyContains is Python's "item in container".
func pyContains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, rtErr("TypeError", "'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case []any:
		for _, x := range c {
			if pyEq(x, item) {
				return true, nil
			}
		}
		return false, nil
	case tuple:
		for _, x := range c {
			if pyEq(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		switch k := item.(type) {
		case string:
			_, ok := c.m[k]
			return ok, nil
		case []any, *dict:
			return false, rtErr("TypeError", "unhashable type: '%s'", typeName(item))
		}
		return false, nil
	case *undefined:
		if c.unsafe {
			return false, c.fail()
		}
		return false, nil
	}
	return false, rtErr("TypeError", "argument of type '%s' is not iterable", typeName(container))
}

// intPow is base**exp by squaring; ok is false when it overflows int64.
func intPow(base, exp int64) (int64, bool) {
	res := int64(1)
	for exp > 0 {
		if exp&1 == 1 {
			p, ok := mulOK(res, base)
			if !ok {
				return 0, false
			}
			res = p
		}
		exp >>= 1
		if exp > 0 {
			b, ok := mulOK(base, base)
			if !ok {
				return 0, false
			}
			base = b
		}
	}
	return res, true
}

func mulOK(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}
