package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Template is a parsed chat template. It is safe for concurrent use once
// Limits is set (or left zero).
type Template struct {
	// Limits bounds each rendering; zero fields take DefaultLimits'.
	Limits Limits

	src  string // normalized source, for error positions
	body []node
	now  func() time.Time // strftime_now's clock; nil: time.Now
}

// Limits bound one rendering so that a hostile template fails with an
// error matching ErrLimit instead of hanging or exhausting memory.
type Limits struct {
	// MaxOutput bounds the rendered text, and any one string or JSON
	// text the template builds, in bytes; a list it builds has at most
	// MaxOutput/16 items.
	MaxOutput int
	// MaxSteps bounds the work, and so the memory: one step per
	// statement, loop iteration, call, filter and test, plus one per 128
	// bytes of text built or written, per 256 bytes of text walked over,
	// and per 4 list items walked over or built.
	MaxSteps int
	// MaxDepth bounds how deeply macro calls nest.
	MaxDepth int
}

// DefaultLimits are the limits of a Template whose Limits are zero.
var DefaultLimits = Limits{MaxOutput: 16 << 20, MaxSteps: 1_000_000, MaxDepth: 64}

// ErrLimit matches (errors.Is) the error of a rendering stopped by Limits.
var ErrLimit = errors.New("chat template limit exceeded")

// TemplateError is what the template's raise_exception(message) raises
// (Hugging Face's TemplateError): the request cannot be rendered, for the
// reason Message gives, word for word.
type TemplateError struct {
	Message string
}

// Error returns Message exactly.
func (e *TemplateError) Error() string { return e.Message }

// RenderError is an error Python would raise while rendering: Type is
// Python's exception class (TypeError, UndefinedError, ValueError,
// SecurityError, ...; LimitError for Limits) and Message its text in
// Python's wording, as str(exception) gives it.
type RenderError struct {
	Type    string
	Message string
	Line    int // the template line being rendered; 0 if unknown
}

// Error writes the error as Python names it, with the template line.
func (e *RenderError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (template line %d)", e.Type, e.Message, e.Line)
	}
	return e.Type + ": " + e.Message
}

// Is makes a LimitError match ErrLimit.
func (e *RenderError) Is(target error) bool { return target == ErrLimit && e.Type == "LimitError" }

// SyntaxError is a template that does not parse, or uses what this package
// does not implement; Line and Col (in characters) are 1-based.
type SyntaxError struct {
	Line, Col int
	Message   string
}

// Error names the line and column.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("chat template syntax error at line %d, column %d: %s", e.Line, e.Col, e.Message)
}

func rtErr(typ, format string, args ...any) *RenderError {
	return &RenderError{Type: typ, Message: fmt.Sprintf(format, args...)}
}

func limitErr(format string, args ...any) *RenderError {
	return rtErr("LimitError", format, args...)
}

func newSyntaxError(src string, pos int, format string, args ...any) *SyntaxError {
	line, col := lineCol(src, pos)
	return &SyntaxError{Line: line, Col: col, Message: fmt.Sprintf(format, args...)}
}

// lineCol gives the 1-based line and column (in characters) of a byte
// offset.
func lineCol(src string, pos int) (int, int) {
	pos = min(max(pos, 0), len(src))
	before := src[:pos]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

// Parse parses a chat template. A template that does not parse gives a
// *SyntaxError naming the line and column.
func Parse(src string) (*Template, error) {
	src = normalizeSource(src)
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	body, _, err := p.parseBody()
	if err != nil {
		return nil, err
	}
	return &Template{src: src, body: body}, nil
}

// Render renders a conversation as transformers' apply_chat_template does.
// messages is the JSON array of messages as the request sent them (object
// keys keep their order, numbers their int or float kind); tools the
// JSON array of tools, or nil (the template's tools is then none). vars
// are the other variables: add_generation_prompt (false when absent), the
// special tokens, chat_template_kwargs such as enable_thinking. Their
// values are JSON-like: nil, bool, int, int64, float64, json.Number,
// string, []string, []any, map[string]any (keys sorted) and
// json.RawMessage (decoded keeping key order). documents is none unless
// vars sets it.
//
// A raise_exception in the template gives a *TemplateError; what Python
// would fail on (a wrong type, an undefined value) a *RenderError; a limit
// reached an error matching ErrLimit.
func (t *Template) Render(messages, tools json.RawMessage, vars map[string]any) (string, error) {
	msgs, ctx, err := prepare(messages, tools, vars)
	if err != nil {
		return "", err
	}
	ctx["messages"] = msgs
	return t.render(ctx)
}

// ContinueSentinel is what RenderContinue appends to the final message's
// content to find where it ends in the rendered text (transformers'
// continue_final_message).
const ContinueSentinel = "CONTINUE_FINAL_MESSAGE_TAG "

// RenderContinue renders as Render for continue_final_message: the output
// ends where the final message's content does, without what the template
// writes after it (an end-of-turn token), so that the model continues
// that message. As transformers 5: ContinueSentinel is appended to the
// final message's content (for a list of parts, to the text of the last
// part that has one), the output cut at the sentinel's last occurrence,
// and, when the template trimmed the sentinel's space (so also the
// content's trailing whitespace), trailing whitespace stripped from what
// remains. A template that drops the content gives an error.
func (t *Template) RenderContinue(messages, tools json.RawMessage, vars map[string]any) (string, error) {
	msgs, ctx, err := prepare(messages, tools, vars)
	if err != nil {
		return "", err
	}
	list := msgs.([]any)
	if len(list) == 0 {
		return "", fmt.Errorf("chat: continue_final_message needs a final message")
	}
	last, ok := list[len(list)-1].(*dict)
	if !ok {
		return "", fmt.Errorf("chat: the final message is not an object")
	}
	switch c := last.m["content"].(type) {
	case string:
		last.set("content", c+ContinueSentinel)
	case []any:
		found := false
		for i := len(c) - 1; i >= 0 && !found; i-- {
			part, ok := c[i].(*dict)
			if !ok {
				continue
			}
			if text, ok := part.get("text"); ok {
				s, ok := text.(string)
				if !ok {
					return "", fmt.Errorf("chat: the final message's text is not a string")
				}
				part.set("text", s+ContinueSentinel)
				found = true
			}
		}
		if !found {
			return "", fmt.Errorf("chat: continue_final_message is set but we could not find any text to continue in the final message")
		}
	default:
		return "", fmt.Errorf("chat: continue_final_message is set but the final message's content is %s, not text", typeName(c))
	}
	ctx["messages"] = msgs
	text, err := t.render(ctx)
	if err != nil {
		return "", err
	}
	tag := strings.TrimSpace(ContinueSentinel)
	i := strings.LastIndex(text, tag)
	if i < 0 {
		return "", fmt.Errorf("chat: continue_final_message is set but the final message does not appear in the chat after applying the chat template")
	}
	exact := strings.HasPrefix(text[i:], ContinueSentinel)
	text = text[:i]
	if !exact {
		text = strings.TrimRightFunc(text, isPySpace)
	}
	return text, nil
}

// prepare decodes the inputs into the rendering's variables.
func prepare(messages, tools json.RawMessage, vars map[string]any) (any, map[string]any, error) {
	ctx := make(map[string]any, len(vars)+4)
	for k, v := range vars {
		c, err := fromGo(v, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("chat: variable %s: %w", k, err)
		}
		ctx[k] = c
	}
	if len(bytes.TrimSpace(messages)) == 0 {
		return nil, nil, fmt.Errorf("chat: no messages")
	}
	msgs, err := decodeJSON(messages)
	if err != nil {
		return nil, nil, fmt.Errorf("chat: messages: %w", err)
	}
	if _, ok := msgs.([]any); !ok {
		return nil, nil, fmt.Errorf("chat: messages: not a JSON array")
	}
	ctx["tools"] = nil
	if len(bytes.TrimSpace(tools)) > 0 {
		tv, err := decodeJSON(tools)
		if err != nil {
			return nil, nil, fmt.Errorf("chat: tools: %w", err)
		}
		ctx["tools"] = tv
	}
	if _, ok := ctx["documents"]; !ok {
		ctx["documents"] = nil
	}
	if _, ok := ctx["add_generation_prompt"]; !ok {
		ctx["add_generation_prompt"] = false
	}
	return msgs, ctx, nil
}

func (t *Template) render(ctx map[string]any) (out string, err error) {
	lim := t.Limits
	if lim.MaxOutput <= 0 {
		lim.MaxOutput = DefaultLimits.MaxOutput
	}
	if lim.MaxSteps <= 0 {
		lim.MaxSteps = DefaultLimits.MaxSteps
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultLimits.MaxDepth
	}
	var b strings.Builder
	e := &evaluator{t: t, limits: lim, out: &b, now: t.now}
	if e.now == nil {
		e.now = time.Now
	}
	root := &frame{vars: globals}
	ctxFrame := &frame{vars: ctx, parent: root}
	if _, err := e.exec(t.body, newFrame(ctxFrame)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// SpecialTokens are the tokens transformers passes to every rendering (its
// special_tokens_map); an empty field is a token the model does not set.
type SpecialTokens struct {
	BOS, EOS, UNK, PAD string
	Additional         []string
}

// Vars gives the tokens as template variables: bos_token, eos_token,
// unk_token, pad_token and additional_special_tokens, those set only.
func (s SpecialTokens) Vars() map[string]any {
	vars := map[string]any{}
	for name, tok := range map[string]string{"bos_token": s.BOS, "eos_token": s.EOS, "unk_token": s.UNK, "pad_token": s.PAD} {
		if tok != "" {
			vars[name] = tok
		}
	}
	if len(s.Additional) > 0 {
		vars["additional_special_tokens"] = append([]string(nil), s.Additional...)
	}
	return vars
}

// Load reads the chat template of the model in dir as transformers does,
// with the special tokens of its tokenizer_config.json (a token written
// as an AddedToken object counts by its "content"). The template is
// chat_template.jinja when the folder has one, else tokenizer_config.json's
// chat_template: a string, or a list of {"name", "template"} of which
// "default" is taken. A non-empty name other than "default" picks that
// template instead: additional_chat_templates/<name>.jinja, or the entry
// of that name in the list (as transformers picks "tool_use" for a
// request with tools when the model has one).
func Load(dir string, name string) (*Template, SpecialTokens, error) {
	cfg, toks, haveCfg, err := readTokenizerConfig(dir)
	if err != nil {
		return nil, toks, err
	}
	src, err := findTemplate(dir, name, cfg.ChatTemplate, haveCfg)
	if err != nil {
		return nil, toks, err
	}
	t, err := Parse(src)
	if err != nil {
		return nil, toks, err
	}
	return t, toks, nil
}

func findTemplate(dir, name string, fromCfg json.RawMessage, haveCfg bool) (string, error) {
	named := name != "" && name != "default"
	file := filepath.Join(dir, "chat_template.jinja")
	if named {
		file = filepath.Join(dir, "additional_chat_templates", name+".jinja")
	}
	if b, err := os.ReadFile(file); err == nil {
		return string(b), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("chat: %w", err)
	}
	if !haveCfg {
		return "", fmt.Errorf("chat: %s has neither chat_template.jinja nor tokenizer_config.json", dir)
	}
	fromCfg = bytes.TrimSpace(fromCfg)
	if len(fromCfg) == 0 || bytes.Equal(fromCfg, []byte("null")) {
		return "", fmt.Errorf("chat: the model in %s has no chat template", dir)
	}
	var s string
	if json.Unmarshal(fromCfg, &s) == nil {
		if named {
			return "", fmt.Errorf("chat: the model in %s has no chat template named %q", dir, name)
		}
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(fromCfg, &list); err != nil {
		return "", fmt.Errorf("chat: chat_template in %s is neither a string nor a list of named templates", dir)
	}
	want := name
	if !named {
		want = "default"
	}
	var names []string
	for _, t := range list {
		if t.Name == want {
			return t.Template, nil
		}
		names = append(names, t.Name)
	}
	return "", fmt.Errorf("chat: the model in %s has no chat template named %q (it has %s)", dir, want, strings.Join(names, ", "))
}

// tokenContent reads a special token: a string, an AddedToken object (its
// "content"), or null ("").
func tokenContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("a special token is neither a string nor an object with a content")
	}
	return *obj.Content, nil
}

// tokenizerConfig is what Load reads of tokenizer_config.json.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage   `json:"chat_template"`
	BOS          json.RawMessage   `json:"bos_token"`
	EOS          json.RawMessage   `json:"eos_token"`
	UNK          json.RawMessage   `json:"unk_token"`
	PAD          json.RawMessage   `json:"pad_token"`
	Additional   []json.RawMessage `json:"additional_special_tokens"`
}

// readTokenizerConfig reads dir's tokenizer_config.json, if there is one,
// and the special tokens it names; haveCfg says whether it exists.
func readTokenizerConfig(dir string) (cfg tokenizerConfig, toks SpecialTokens, haveCfg bool, err error) {
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(cfgPath)
	haveCfg = err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return cfg, toks, false, fmt.Errorf("chat: %w", err)
	}
	if haveCfg {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return cfg, toks, haveCfg, fmt.Errorf("chat: %s: %w", cfgPath, err)
		}
		for _, f := range []struct {
			raw json.RawMessage
			dst *string
		}{{cfg.BOS, &toks.BOS}, {cfg.EOS, &toks.EOS}, {cfg.UNK, &toks.UNK}, {cfg.PAD, &toks.PAD}} {
			if *f.dst, err = tokenContent(f.raw); err != nil {
				return cfg, toks, haveCfg, fmt.Errorf("chat: %s: %w", cfgPath, err)
			}
		}
		for _, a := range cfg.Additional {
			s, err := tokenContent(a)
			if err != nil {
				return cfg, toks, haveCfg, fmt.Errorf("chat: %s: %w", cfgPath, err)
			}
			if s != "" {
				toks.Additional = append(toks.Additional, s)
			}
		}
	}
	return cfg, toks, haveCfg, nil
}

// LoadSpecialTokens reads the special tokens of dir's
// tokenizer_config.json, as Load does; none when it has no such file. A
// template given on its own (vLLM's --chat-template) is rendered with the
// model's tokens.
func LoadSpecialTokens(dir string) (SpecialTokens, error) {
	_, toks, _, err := readTokenizerConfig(dir)
	return toks, err
}
