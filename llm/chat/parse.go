package chat

import (
	"math/big"
	"strconv"
	"strings"
)

// Statements.
type (
	textNode   struct{ s string }
	outputNode struct {
		x   expr
		pos int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
		pos    int
	}
	forNode struct {
		target    target
		iter      expr
		cond      expr // nil: no filter
		body, els []node
		pos       int
	}
	setNode struct {
		target target
		x      expr   // nil for a block set
		body   []node // the block set's body
		pos    int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // nil entries: no default
		body     []node
		pos      int
	}
	breakNode    struct{ pos int }
	continueNode struct{ pos int }
	groupNode    struct{ body []node } // {% generation %}: rendered as is
)

// target is what set and for assign to: one name, several (unpacking), or
// a namespace's attribute.
type target struct {
	names []string
	tuple bool
	attr  string // with names[0] the namespace
}

// Expressions.
type (
	constExpr struct{ v any }
	nameExpr  struct {
		name string
		pos  int
	}
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
	attrExpr  struct {
		x    expr
		name string
		pos  int
	}
	itemExpr struct {
		x, key expr
		pos    int
	}
	sliceExpr struct {
		x            expr
		lo, hi, step expr // nil: omitted
		pos          int
	}
	callExpr struct {
		fn   expr
		args callArgs
		pos  int
	}
	filterExpr struct {
		x    expr
		name string
		args callArgs
		pos  int
	}
	testExpr struct {
		x    expr
		name string
		args callArgs
		pos  int
	}
	notExpr   struct{ x expr }
	unaryExpr struct {
		op  string // "-" or "+"
		x   expr
		pos int
	}
	binExpr struct {
		op   string // + - * / // % ** ~
		l, r expr
		pos  int
	}
	andExpr struct{ l, r expr }
	orExpr  struct{ l, r expr }
	cmpExpr struct {
		first expr
		ops   []string // == != < <= > >= in notin
		rest  []expr
		pos   int
	}
	condExpr struct {
		cond, then, els expr // els nil: undefined
		pos             int
	}
)

type node any
type expr any

type callArgs struct {
	pos     []expr
	kwNames []string
	kw      []expr
}

// maxNesting bounds how deep blocks and expressions may nest, so that a
// hostile template cannot exhaust the stack.
const maxNesting = 1000

type parser struct {
	src       string
	toks      []token
	i         int
	depth     int
	loopDepth int
}

func (p *parser) cur() token  { return p.toks[p.i] }
func (p *parser) peek() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) advance() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return newSyntaxError(p.src, pos, format, args...)
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tName && t.val == name
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tData:
		return "template data"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "end of statement block"
	case tString:
		return "string " + pyRepr(t.val)
	}
	return "'" + t.val + "'"
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.errAt(p.cur().pos, "expected '%s', got %s", op, describe(p.cur()))
	}
	p.advance()
	return nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	if p.cur().kind != k {
		return token{}, p.errAt(p.cur().pos, "expected %s, got %s", what, describe(p.cur()))
	}
	return p.advance(), nil
}

func (p *parser) expectBlockEnd() error {
	_, err := p.expectKind(tBlockEnd, "end of statement block")
	return err
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > maxNesting {
		return p.errAt(pos, "template nested too deeply (more than %d levels)", maxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseBody parses nodes up to one of the end tags (the name after "{%"),
// which it consumes; it returns the tag found ("" at the end of the
// template, allowed only when ends is empty).
func (p *parser) parseBody(ends ...string) ([]node, string, error) {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			if len(ends) > 0 {
				return nil, "", p.errAt(t.pos, "unexpected end of template, expected '%s'", strings.Join(ends, "' or '"))
			}
			return body, "", nil
		case tData:
			p.advance()
			body = append(body, &textNode{s: t.val})
		case tVarBegin:
			p.advance()
			x, err := p.parseTuple(true, false)
			if err != nil {
				return nil, "", err
			}
			if _, err := p.expectKind(tVarEnd, "end of print statement"); err != nil {
				return nil, "", err
			}
			body = append(body, &outputNode{x: x, pos: t.pos})
		case tBlockBegin:
			p.advance()
			name := p.cur()
			if name.kind != tName {
				return nil, "", p.errAt(name.pos, "expected a tag name, got %s", describe(name))
			}
			for _, e := range ends {
				if name.val == e {
					p.advance()
					return body, e, nil
				}
			}
			n, err := p.parseStatement(t.pos)
			if err != nil {
				return nil, "", err
			}
			body = append(body, n)
		default:
			return nil, "", p.errAt(t.pos, "unexpected %s", describe(t))
		}
	}
}

func (p *parser) parseStatement(pos int) (node, error) {
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	defer p.leave()
	name := p.advance()
	switch name.val {
	case "if":
		return p.parseIf(pos)
	case "for":
		return p.parseFor(pos)
	case "set":
		return p.parseSet(pos)
	case "macro":
		return p.parseMacro(pos)
	case "break", "continue":
		if p.loopDepth == 0 {
			return nil, p.errAt(name.pos, "'%s' outside of a loop", name.val)
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if name.val == "break" {
			return &breakNode{pos: pos}, nil
		}
		return &continueNode{pos: pos}, nil
	case "generation":
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		return &groupNode{body: body}, nil
	case "elif", "else", "endif", "endfor", "endset", "endmacro", "endgeneration":
		return nil, p.errAt(name.pos, "unexpected '%s'", name.val)
	}
	return nil, p.errAt(name.pos, "unknown or unsupported tag '%s'", name.val)
}

func (p *parser) parseIf(pos int) (node, error) {
	n := &ifNode{pos: pos}
	for {
		cond, err := p.parseTuple(false, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, tag, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch tag {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.parseBody("endif"); err != nil {
				return nil, err
			}
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) parseFor(pos int) (node, error) {
	n := &forNode{pos: pos}
	var err error
	if n.target, err = p.parseTarget(false); err != nil {
		return nil, err
	}
	if !p.isName("in") {
		return nil, p.errAt(p.cur().pos, "expected 'in', got %s", describe(p.cur()))
	}
	p.advance()
	if n.iter, err = p.parseTuple(false, false, "recursive"); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.advance()
		if n.cond, err = p.parseExpr(true); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.errAt(p.cur().pos, "recursive loops are not supported")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	p.loopDepth++
	body, tag, err := p.parseBody("endfor", "else")
	p.loopDepth--
	if err != nil {
		return nil, err
	}
	n.body = body
	if tag == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		saved := p.loopDepth
		p.loopDepth = 0 // the else block is not in the loop
		n.els, _, err = p.parseBody("endfor")
		p.loopDepth = saved
		if err != nil {
			return nil, err
		}
	}
	return n, p.expectBlockEnd()
}

// parseTarget parses an assignment target: name, name.attr (set only),
// or names separated by commas, optionally in parentheses.
func (p *parser) parseTarget(withNamespace bool) (target, error) {
	if withNamespace && p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "." {
		ns := p.advance().val
		p.advance()
		attr, err := p.expectKind(tName, "an attribute name")
		if err != nil {
			return target{}, err
		}
		return target{names: []string{ns}, attr: attr.val}, nil
	}
	paren := p.isOp("(")
	if paren {
		p.advance()
	}
	var t target
	for {
		name, err := p.expectKind(tName, "a name to assign to")
		if err != nil {
			return target{}, err
		}
		switch name.val {
		case "true", "false", "none", "True", "False", "None":
			return target{}, p.errAt(name.pos, "cannot assign to '%s'", name.val)
		}
		t.names = append(t.names, name.val)
		if !p.isOp(",") {
			break
		}
		p.advance()
		t.tuple = true
		if paren && p.isOp(")") || !paren && (p.isName("in") || p.isOp("=")) {
			break
		}
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return target{}, err
		}
	}
	return t, nil
}

func (p *parser) parseSet(pos int) (node, error) {
	t, err := p.parseTarget(true)
	if err != nil {
		return nil, err
	}
	n := &setNode{target: t, pos: pos}
	if p.isOp("=") {
		p.advance()
		if n.x, err = p.parseTuple(true, false); err != nil {
			return nil, err
		}
		return n, p.expectBlockEnd()
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.parseBody("endset"); err != nil {
		return nil, err
	}
	return n, p.expectBlockEnd()
}

func (p *parser) parseMacro(pos int) (node, error) {
	name, err := p.expectKind(tName, "a macro name")
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name.val, pos: pos}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		if len(n.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		param, err := p.expectKind(tName, "a parameter name")
		if err != nil {
			return nil, err
		}
		var def expr
		if p.isOp("=") {
			p.advance()
			if def, err = p.parseExpr(true); err != nil {
				return nil, err
			}
		} else if len(n.defaults) > 0 && n.defaults[len(n.defaults)-1] != nil {
			return nil, p.errAt(param.pos, "non-default argument follows default argument")
		}
		n.params = append(n.params, param.val)
		n.defaults = append(n.defaults, def)
	}
	p.advance()
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	saved := p.loopDepth
	p.loopDepth = 0
	n.body, _, err = p.parseBody("endmacro")
	p.loopDepth = saved
	if err != nil {
		return nil, err
	}
	if p.cur().kind == tName && p.cur().val == n.name {
		p.advance()
	}
	return n, p.expectBlockEnd()
}

// parseTuple is Jinja's parse_tuple: expressions separated by commas make a
// tuple, one alone is itself. extraEnds are names that end it.
func (p *parser) parseTuple(withCond, explicitParens bool, extraEnds ...string) (expr, error) {
	pos := p.cur().pos
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.tupleEnd(extraEnds) {
			break
		}
		x, err := p.parseExpr(withCond)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.errAt(pos, "expected an expression, got %s", describe(p.cur()))
		}
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) tupleEnd(extraEnds []string) bool {
	t := p.cur()
	switch t.kind {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tOp:
		return t.val == ")"
	case tName:
		for _, e := range extraEnds {
			if t.val == e {
				return true
			}
		}
	}
	return false
}

func (p *parser) parseExpr(withCond bool) (expr, error) {
	if err := p.enter(p.cur().pos); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCond {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	pos := p.cur().pos
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.advance()
		cond, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		n := &condExpr{cond: cond, then: x, pos: pos}
		if p.isName("else") {
			p.advance()
			if n.els, err = p.parseExpr(true); err != nil {
				return nil, err
			}
		}
		x = n
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isName("or") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &orExpr{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isName("and") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &andExpr{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		pos := p.advance().pos
		if err := p.enter(pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	pos := p.cur().pos
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	n := &cmpExpr{first: first, pos: pos}
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.advance()
		case p.isName("in"):
			op = "in"
			p.advance()
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			op = "notin"
			p.advance()
			p.advance()
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		n.ops = append(n.ops, op)
		n.rest = append(n.rest, r)
	}
	if len(n.ops) == 0 {
		return first, nil
	}
	return n, nil
}

func (p *parser) parseMath1() (expr, error) {
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	l, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	for p.isOp("~") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "~", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseMath2() (expr, error) {
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.isOp("**") {
		t := p.advance()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "**", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	t := p.cur()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	var x expr
	var err error
	if t.kind == tOp && (t.val == "-" || t.val == "+") {
		p.advance()
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{op: t.val, x: inner, pos: t.pos}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	switch t.kind {
	case tName:
		p.advance()
		switch t.val {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		return &nameExpr{name: t.val, pos: t.pos}, nil
	case tString:
		s := p.advance().val
		for p.cur().kind == tString {
			s += p.advance().val
		}
		return &constExpr{v: s}, nil
	case tInt:
		p.advance()
		v, err := parseIntLiteral(t.val)
		if err != nil {
			return nil, p.errAt(t.pos, "invalid integer %q", t.val)
		}
		return &constExpr{v: v}, nil
	case tFloat:
		p.advance()
		f, err := strconv.ParseFloat(strings.ReplaceAll(t.val, "_", ""), 64)
		if err != nil && f == 0 {
			return nil, p.errAt(t.pos, "invalid float %q", t.val)
		}
		return &constExpr{v: f}, nil
	case tOp:
		switch t.val {
		case "(":
			p.advance()
			x, err := p.parseTuple(true, true)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			p.advance()
			l := &listExpr{}
			for !p.isOp("]") {
				if len(l.items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				x, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
			}
			p.advance()
			return l, nil
		case "{":
			p.advance()
			d := &dictExpr{}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.advance()
			return d, nil
		}
	}
	return nil, p.errAt(t.pos, "unexpected %s", describe(t))
}

func parseIntLiteral(s string) (any, error) {
	s = strings.ReplaceAll(s, "_", "")
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return i, nil
	}
	n, ok := new(big.Int).SetString(s, 0)
	if !ok {
		return nil, strconv.ErrSyntax
	}
	return bigInt{n.String()}, nil
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		t := p.cur()
		if t.kind != tOp {
			return x, nil
		}
		var err error
		switch t.val {
		case ".":
			p.advance()
			a := p.advance()
			switch a.kind {
			case tName:
				x = &attrExpr{x: x, name: a.val, pos: a.pos}
			case tInt:
				v, err := parseIntLiteral(a.val)
				if err != nil {
					return nil, p.errAt(a.pos, "invalid integer %q", a.val)
				}
				x = &itemExpr{x: x, key: &constExpr{v: v}, pos: a.pos}
			default:
				return nil, p.errAt(a.pos, "expected an attribute name, got %s", describe(a))
			}
		case "[":
			if x, err = p.parseSubscript(x); err != nil {
				return nil, err
			}
		case "(":
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
	}
}

func (p *parser) parseSubscript(x expr) (expr, error) {
	pos := p.advance().pos
	var keys []expr
	for !p.isOp("]") {
		if len(keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("]") {
				break
			}
		}
		k, err := p.parseSubscribed(x, pos)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	p.advance()
	switch len(keys) {
	case 0:
		return nil, p.errAt(pos, "expected a subscript")
	case 1:
		if s, ok := keys[0].(*sliceExpr); ok {
			return s, nil
		}
		return &itemExpr{x: x, key: keys[0], pos: pos}, nil
	}
	for _, k := range keys {
		if _, ok := k.(*sliceExpr); ok {
			return nil, p.errAt(pos, "slices inside a tuple subscript are not supported")
		}
	}
	return &itemExpr{x: x, key: &tupleExpr{items: keys}, pos: pos}, nil
}

// parseSubscribed parses one subscript: an expression, or a slice of x.
func (p *parser) parseSubscribed(x expr, pos int) (expr, error) {
	var parts [3]expr
	if !p.isOp(":") {
		k, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return k, nil
		}
		parts[0] = k
	}
	p.advance() // the first ':'
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		hi, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		parts[1] = hi
	}
	if p.isOp(":") {
		p.advance()
		if !p.isOp("]") && !p.isOp(",") {
			step, err := p.parseExpr(true)
			if err != nil {
				return nil, err
			}
			parts[2] = step
		}
	}
	return &sliceExpr{x: x, lo: parts[0], hi: parts[1], step: parts[2], pos: pos}, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	pos := p.cur().pos
	args, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{fn: fn, args: args, pos: pos}, nil
}

// parseCallArgs parses "(a, b, k=v)", the current token being "(".
func (p *parser) parseCallArgs() (callArgs, error) {
	var a callArgs
	p.advance()
	for !p.isOp(")") {
		if len(a.pos) > 0 || len(a.kw) > 0 {
			if err := p.expectOp(","); err != nil {
				return a, err
			}
			if p.isOp(")") {
				break
			}
		}
		if p.isOp("*") || p.isOp("**") {
			return a, p.errAt(p.cur().pos, "*args and **kwargs in calls are not supported")
		}
		if p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=" {
			name := p.advance().val
			p.advance()
			v, err := p.parseExpr(true)
			if err != nil {
				return a, err
			}
			a.kwNames = append(a.kwNames, name)
			a.kw = append(a.kw, v)
			continue
		}
		if len(a.kw) > 0 {
			return a, p.errAt(p.cur().pos, "positional argument follows keyword argument")
		}
		v, err := p.parseExpr(true)
		if err != nil {
			return a, err
		}
		a.pos = append(a.pos, v)
	}
	p.advance()
	return a, nil
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			p.advance()
			name, err := p.dottedName()
			if err != nil {
				return nil, err
			}
			f := &filterExpr{x: x, name: name.val, pos: name.pos}
			if p.isOp("(") {
				if f.args, err = p.parseCallArgs(); err != nil {
					return nil, err
				}
			}
			x = f
		case p.isName("is"):
			if x, err = p.parseTest(x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
		if err := p.enter(p.cur().pos); err != nil {
			return nil, err
		}
		defer p.leave()
	}
}

func (p *parser) dottedName() (token, error) {
	name, err := p.expectKind(tName, "a filter or test name")
	if err != nil {
		return name, err
	}
	for p.isOp(".") {
		p.advance()
		part, err := p.expectKind(tName, "a name")
		if err != nil {
			return name, err
		}
		name.val += "." + part.val
	}
	return name, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	p.advance() // is
	negated := false
	if p.isName("not") {
		p.advance()
		negated = true
	}
	name, err := p.dottedName()
	if err != nil {
		return nil, err
	}
	t := &testExpr{x: x, name: name.val, pos: name.pos}
	c := p.cur()
	switch {
	case p.isOp("("):
		if t.args, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.kind == tName || c.kind == tString || c.kind == tInt || c.kind == tFloat ||
		c.kind == tOp && (c.val == "(" || c.val == "[" || c.val == "{")) &&
		!(c.kind == tName && (c.val == "else" || c.val == "or" || c.val == "and")):
		if c.kind == tName && c.val == "is" {
			return nil, p.errAt(c.pos, "you cannot chain multiple tests with is")
		}
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		t.args.pos = []expr{arg}
	}
	if negated {
		return &notExpr{x: t}, nil
	}
	return t, nil
}
