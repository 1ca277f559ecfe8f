package chat

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF        tokKind = iota
	tData               // template text
	tVarBegin           // {{
	tVarEnd             // }}
	tBlockBegin         // {%
	tBlockEnd           // %}
	tName
	tString // val is the decoded text
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string
	pos  int // byte offset in the normalized source
}

// lexer splits a template as Jinja's lexer does with trim_blocks and
// lstrip_blocks on: a block or comment tag eats one newline after it, the
// spaces before it on its line, and "-" on a tag's side strips all
// whitespace on that side ("+" keeps it).
type lexer struct {
	src  string
	pos  int
	toks []token
}

// normalizeSource is what Jinja does before lexing: every newline
// (\r\n, \r, \n) becomes \n and one trailing newline is dropped
// (keep_trailing_newline=False).
func normalizeSource(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func lex(src string) ([]token, error) {
	lx := &lexer{src: src, toks: make([]token, 0, len(src)/8+8)}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tEOF, pos: len(src)})
	return lx.toks, nil
}

func (lx *lexer) errAt(pos int, format string, args ...any) error {
	return newSyntaxError(lx.src, pos, format, args...)
}

func pyRStrip(s string) string {
	return strings.TrimRightFunc(s, isPySpace)
}

func allPySpace(s string) bool {
	for _, r := range s {
		if !isPySpace(r) {
			return false
		}
	}
	return s != ""
}

// skipSpaceAfter returns the end of the whitespace run starting at i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isPySpace(r) {
			break
		}
		i += n
	}
	return i
}

func (lx *lexer) run() error {
	src := lx.src
	lineStarting := true
	for lx.pos < len(src) {
		i := -1
		for k := lx.pos; k+1 < len(src); k++ {
			n := strings.IndexByte(src[k:len(src)-1], '{')
			if n < 0 {
				break
			}
			k += n
			if c := src[k+1]; c == '{' || c == '%' || c == '#' {
				i = k
				break
			}
		}
		if i < 0 {
			lx.toks = append(lx.toks, token{kind: tData, val: src[lx.pos:], pos: lx.pos})
			return nil
		}
		text := src[lx.pos:i]
		kind := src[i+1]
		j := i + 2
		sign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		switch {
		case sign == '-':
			text = pyRStrip(text)
		case sign != '+' && kind != '{':
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lineStarting) && allPySpace(text[lpos:]) {
				text = text[:lpos]
			}
		}
		if text != "" {
			lx.toks = append(lx.toks, token{kind: tData, val: text, pos: lx.pos})
		}
		var end int
		var err error
		switch kind {
		case '#':
			end, err = lx.comment(i, j)
		case '%':
			lx.toks = append(lx.toks, token{kind: tBlockBegin, pos: i})
			end, err = lx.tag(j, '%')
		default:
			lx.toks = append(lx.toks, token{kind: tVarBegin, pos: i})
			end, err = lx.tag(j, '}')
		}
		if err != nil {
			return err
		}
		lineStarting = end > 0 && src[end-1] == '\n'
		lx.pos = end
	}
	return nil
}

// comment skips a comment whose body starts at j; it returns the end.
func (lx *lexer) comment(start, j int) (int, error) {
	src := lx.src
	k := strings.Index(src[j:], "#}")
	if k < 0 {
		return 0, lx.errAt(start, "missing end of comment tag")
	}
	k += j
	end := k + 2
	switch {
	case k > j && src[k-1] == '-':
		end = skipSpace(src, end)
	case k > j && src[k-1] == '+':
	default:
		if end < len(src) && src[end] == '\n' {
			end++
		}
	}
	return end, nil
}

// tag lexes the expression tokens of a {% %} (closer '%') or {{ }}
// (closer '}') tag from j, and its end; it returns where the text after
// it starts.
func (lx *lexer) tag(j int, closer byte) (int, error) {
	src := lx.src
	depth := 0
	var brackets []byte
	pos := j
	for {
		pos = skipSpace(src, pos)
		if pos >= len(src) {
			return 0, lx.errAt(pos, "unexpected end of template, expected the end of the tag")
		}
		if depth == 0 {
			c := src[pos]
			// "+" ends only a block tag: "+}}" is an operator and "}}".
			if (c == '-' || c == '+' && closer == '%') && strings.HasPrefix(src[pos+1:], string(closer)+"}") {
				end := pos + 3
				if c == '-' {
					end = skipSpace(src, end)
				}
				lx.toks = append(lx.toks, lx.endTok(closer, pos))
				return end, nil
			}
			if c == closer && pos+1 < len(src) && src[pos+1] == '}' {
				end := pos + 2
				if closer == '%' && end < len(src) && src[end] == '\n' {
					end++ // trim_blocks
				}
				lx.toks = append(lx.toks, lx.endTok(closer, pos))
				return end, nil
			}
		}
		c := src[pos]
		switch {
		case c == '\'' || c == '"':
			s, end, err := lx.str(pos)
			if err != nil {
				return 0, err
			}
			lx.toks = append(lx.toks, token{kind: tString, val: s, pos: pos})
			pos = end
		case c >= '0' && c <= '9':
			kind, end := lx.number(pos)
			lx.toks = append(lx.toks, token{kind: kind, val: src[pos:end], pos: pos})
			pos = end
		case isNameStart(src[pos:]):
			end := pos
			for end < len(src) {
				r, n := utf8.DecodeRuneInString(src[end:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				end += n
			}
			lx.toks = append(lx.toks, token{kind: tName, val: src[pos:end], pos: pos})
			pos = end
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[pos:])
				return 0, lx.errAt(pos, "unexpected char %q", r)
			}
			switch op {
			case "(", "[", "{":
				depth++
				brackets = append(brackets, op[0])
			case ")", "]", "}":
				want := map[string]byte{")": '(', "]": '[', "}": '{'}[op]
				if depth == 0 {
					return 0, lx.errAt(pos, "unexpected '%s'", op)
				}
				if brackets[len(brackets)-1] != want {
					return 0, lx.errAt(pos, "unexpected '%s', expected the closing of '%c'", op, brackets[len(brackets)-1])
				}
				depth--
				brackets = brackets[:len(brackets)-1]
			}
			lx.toks = append(lx.toks, token{kind: tOp, val: op, pos: pos})
			pos += len(op)
		}
	}
}

func isNameStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func (lx *lexer) endTok(closer byte, pos int) token {
	if closer == '%' {
		return token{kind: tBlockEnd, pos: pos}
	}
	return token{kind: tVarEnd, pos: pos}
}

// operators, longest first.
var operators = []string{"//", "**", "==", "!=", ">=", "<=",
	"+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

func isDigitOrUnderscore(c byte) bool { return c >= '0' && c <= '9' || c == '_' }

// number lexes an integer or float literal at pos.
func (lx *lexer) number(pos int) (tokKind, int) {
	src := lx.src
	end := pos
	if src[pos] == '0' && pos+1 < len(src) && strings.IndexByte("xXoObB", src[pos+1]) >= 0 {
		end = pos + 2
		for end < len(src) && (isHex(src[end]) || src[end] == '_') {
			end++
		}
		return tInt, end
	}
	for end < len(src) && isDigitOrUnderscore(src[end]) {
		end++
	}
	if pos > 0 && src[pos-1] == '.' {
		return tInt, end // a.0.1 is two subscripts, not a float
	}
	kind := tInt
	if end+1 < len(src) && src[end] == '.' && src[end+1] >= '0' && src[end+1] <= '9' {
		end++
		for end < len(src) && isDigitOrUnderscore(src[end]) {
			end++
		}
		kind = tFloat
	}
	if end < len(src) && (src[end] == 'e' || src[end] == 'E') {
		k := end + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && src[k] >= '0' && src[k] <= '9' {
			for k < len(src) && isDigitOrUnderscore(src[k]) {
				k++
			}
			end = k
			kind = tFloat
		}
	}
	return kind, end
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// str lexes a quoted string at pos, decoding its escapes as Python's
// "unicode-escape" codec does (which is what Jinja applies).
func (lx *lexer) str(pos int) (string, int, error) {
	src := lx.src
	q := src[pos]
	var b strings.Builder
	i := pos + 1
	for i < len(src) {
		c := src[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(src) {
			break
		}
		e := src[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; k++ {
				n = n*8 + int(src[i]-'0')
				i++
			}
			b.WriteRune(rune(n))
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+width > len(src) {
				return "", 0, lx.errAt(i-2, "truncated \\%c escape in a string", e)
			}
			n, err := strconv.ParseUint(src[i:i+width], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", 0, lx.errAt(i-2, "invalid \\%c escape in a string", e)
			}
			b.WriteRune(rune(n))
			i += width
		case 'N':
			return "", 0, lx.errAt(i-2, "\\N{...} escapes are not supported")
		default:
			b.WriteByte('\\') // unknown escapes stay as written
			b.WriteByte(e)
		}
	}
	return "", 0, lx.errAt(pos, "unterminated string")
}
