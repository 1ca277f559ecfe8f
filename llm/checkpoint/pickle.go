package checkpoint

import (
	"bytes"
	"fmt"
	"math/big"
	"strings"
)

// This file reads Python pickles as data. A PyTorch checkpoint
// (pytorch_model.bin) is a pickle, and a pickle is a program for a small
// stack machine that may import and call any Python function: unpickling
// an untrusted one with Python runs whatever its author chose. The machine
// here runs the opcodes that build plain values (numbers, strings, tuples,
// lists, dicts) and nothing else. A global is only a name; what REDUCE,
// BUILD and persistent ids do with it is decided by the caller's hooks
// (torchfile.go allows an OrderedDict and PyTorch's tensor rebuilders),
// so a checkpoint cannot run code here, whatever it holds.

// pyTuple is a Python tuple.
type pyTuple []any

// pyList is a Python list. It is a pointer so that APPEND changes the one
// list that the stack and the memo both refer to.
type pyList struct{ items []any }

// pyDict is a Python dict, in insertion order. Setting a key that is
// already there replaces its value, as in Python.
type pyDict struct {
	keys  []any
	vals  []any
	index map[any]int // position of each key in keys
}

func (d *pyDict) set(k, v any) error {
	switch k.(type) {
	case string, int64, bool, nil:
	default:
		return fmt.Errorf("dict key of type %s is not supported", pyTypeName(k))
	}
	if i, ok := d.index[k]; ok {
		d.vals[i] = v
		return nil
	}
	if d.index == nil {
		d.index = map[any]int{}
	}
	d.index[k] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

// pyGlobal is a name a pickle refers to (GLOBAL, STACK_GLOBAL): nothing is
// imported.
type pyGlobal struct{ module, name string }

// String is the name as Python writes it: module.name.
func (g pyGlobal) String() string { return g.module + "." + g.name }

// pickleHooks decide what the names in a pickle mean. Each returns an error
// for anything it does not know, which ends the unpickling.
type pickleHooks struct {
	// call is REDUCE: callable(*args).
	call func(callable pyGlobal, args pyTuple) (any, error)
	// build is BUILD: obj.__setstate__(state), or its default.
	build func(obj, state any) (any, error)
	// persistentLoad is BINPERSID: the object a persistent id stands for.
	persistentLoad func(pid any) (any, error)
}

// pickleMaxLongBytes bounds LONG1/LONG4 integers. Pickles of tensors hold
// nothing bigger than torch's 10-byte legacy magic number; the bound keeps
// a hostile LONG4 from costing quadratic time in big.Int.
const pickleMaxLongBytes = 64

// pickleMaxBytes bounds one pickle, as maxHeaderBytes bounds a safetensors
// header and a zip checkpoint's data.pkl: a legacy torch.save file has its
// pickles inline, and without a bound a hostile one of any size would be
// run (each byte of it may become a stack slot and an object, some 50
// bytes of memory). A variable for tests.
var pickleMaxBytes = maxHeaderBytes

// unpickle runs the pickle that starts at data[pos] up to its STOP and
// returns the value it leaves and the offset just past the STOP. Errors
// name the byte offset (in data) of the opcode that failed.
func unpickle(data []byte, pos int, hooks pickleHooks) (any, int, error) {
	m := &pickleMachine{data: data, pos: pos, start: pos, hooks: hooks, memo: map[uint64]any{}}
	v, err := m.run()
	if err != nil {
		return nil, 0, fmt.Errorf("pickle at byte %d: %w", m.op, err)
	}
	return v, m.pos, nil
}

type pickleMachine struct {
	data  []byte
	pos   int // next byte to read
	start int // where the pickle starts
	op    int // offset of the opcode being run, for errors
	hooks pickleHooks
	stack []any
	marks []int // stack heights at each MARK
	memo  map[uint64]any
	// pushes counts the values put on the stack, which bounds what the
	// pickle can make the machine hold (see pickleMaxValues).
	pushes int
}

// pickleMaxValues bounds the values one pickle may build. A state dict
// pickle pushes about a dozen per tensor (the largest models have some
// thousands of tensors); the bound keeps a hostile pickle of one-byte
// opcodes (each a new list, say) from allocating some GB within the size
// limit.
var pickleMaxValues = 1 << 22 // a variable for its test

func (m *pickleMachine) run() (any, error) {
	for {
		if m.pushes > pickleMaxValues {
			return nil, fmt.Errorf("the pickle builds more than %d values: not a state dict of tensors", pickleMaxValues)
		}
		m.op = m.pos
		c, err := m.read(1)
		if err != nil {
			return nil, err
		}
		op := c[0]
		if op == opStop {
			if len(m.marks) > 0 {
				return nil, fmt.Errorf("STOP inside an unclosed MARK")
			}
			if len(m.stack) != 1 {
				return nil, fmt.Errorf("STOP with %d values on the stack, want 1", len(m.stack))
			}
			return m.stack[0], nil
		}
		run := pickleOps[op]
		if run == nil {
			if m.data[m.start] != opProto {
				// Protocols 0 and 1 have no PROTO opcode, and write text
				// opcodes (INT for a bool, LONG, PUT, ...) that 2 and later
				// replace; torch.save writes them with pickle_protocol=1.
				return nil, fmt.Errorf("opcode 0x%02x of a pickle of protocol 0 or 1 (no PROTO opcode at its start) is not supported: protocols 2 to 5 are (torch.save's default is 2)", op)
			}
			return nil, fmt.Errorf("opcode 0x%02x is not supported (a checkpoint of tensors needs only data opcodes)", op)
		}
		if err := run(m, op); err != nil {
			return nil, err
		}
	}
}

func (m *pickleMachine) read(n int) ([]byte, error) {
	if n < 0 || n > len(m.data)-m.pos {
		return nil, fmt.Errorf("truncated: %d bytes needed, %d left", n, len(m.data)-m.pos)
	}
	if m.pos+n-m.start > pickleMaxBytes {
		return nil, fmt.Errorf("pickle longer than the %d-byte limit", pickleMaxBytes)
	}
	b := m.data[m.pos : m.pos+n]
	m.pos += n
	return b, nil
}

// uint reads a little-endian unsigned integer of width bytes (1, 2, 4 or 8).
func (m *pickleMachine) uint(width int) (uint64, error) {
	b, err := m.read(width)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := width - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

// prefixed reads the length-prefixed value of opcode op (a string or bytes).
func (m *pickleMachine) prefixed(op byte) ([]byte, error) {
	n, err := m.length(lengthWidth[op])
	if err != nil {
		return nil, err
	}
	return m.read(n)
}

// length reads a little-endian length of width bytes (1, 4 or 8) and
// checks that that many bytes follow.
func (m *pickleMachine) length(width int) (int, error) {
	n, err := m.uint(width)
	if err != nil {
		return 0, err
	}
	if n > uint64(len(m.data)-m.pos) {
		return 0, fmt.Errorf("truncated: a value of %d bytes, %d left", n, len(m.data)-m.pos)
	}
	return int(n), nil
}

// line reads a newline-terminated name (GLOBAL's arguments).
func (m *pickleMachine) line() (string, error) {
	i := bytes.IndexByte(m.data[m.pos:], '\n')
	if i < 0 || i > 256 {
		return "", fmt.Errorf("GLOBAL name without a newline within 256 bytes")
	}
	s := string(m.data[m.pos : m.pos+i])
	m.pos += i + 1
	return s, nil
}

func (m *pickleMachine) push(v any) {
	m.stack = append(m.stack, v)
	m.pushes++
}

// floor is the stack height below which the innermost MARK protects values.
func (m *pickleMachine) floor() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *pickleMachine) top() (any, error) {
	if len(m.stack) <= m.floor() {
		return nil, fmt.Errorf("stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

func (m *pickleMachine) pop() (any, error) {
	v, err := m.top()
	if err != nil {
		return nil, err
	}
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

// popN removes and returns the top n values, which must be above the
// innermost MARK.
func (m *pickleMachine) popN(n int) ([]any, error) {
	if len(m.stack)-m.floor() < n {
		return nil, fmt.Errorf("%d values needed on the stack, %d there", n, len(m.stack)-m.floor())
	}
	items := append([]any{}, m.stack[len(m.stack)-n:]...)
	m.stack = m.stack[:len(m.stack)-n]
	return items, nil
}

// popMark removes and returns the values pushed since the innermost MARK.
func (m *pickleMachine) popMark() ([]any, error) {
	if len(m.marks) == 0 {
		return nil, fmt.Errorf("no MARK to pop to")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := append([]any{}, m.stack[k:]...)
	m.stack = m.stack[:k]
	return items, nil
}

func setItems(d *pyDict, items []any) error {
	if len(items)%2 != 0 {
		return fmt.Errorf("%d values for a dict's keys and values", len(items))
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.set(items[i], items[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// decodeLong decodes a little-endian two's-complement integer: an int64
// when it fits, a *big.Int otherwise.
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := 64 - 8*uint(len(b))
		return int64(u<<shift) >> shift // sign-extend
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	v := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if v.IsInt64() {
		return v.Int64()
	}
	return v
}

// pyTypeName names a value's Python type, for errors.
func pyTypeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case pyTuple:
		return "tuple"
	case *pyList:
		return "list"
	case *pyDict:
		return "dict"
	case pyGlobal:
		return "global " + v.String()
	}
	return fmt.Sprintf("%T", v)
}

// describePy prints a short Python-like form of a pickled value for errors.
// Tuples are shown to a depth of describeDepth and the whole to about
// describeBytes: a pickle builds a tuple of eight references to a tuple
// of eight references ... in a few bytes a level (MARK, BINGETs, TUPLE,
// BINPUT), so printing every element would cost 8^depth, and the nesting
// itself may be millions deep.
func describePy(v any) string {
	var b strings.Builder
	describePyTo(&b, v, 0)
	return b.String()
}

const (
	describeDepth = 3
	describeBytes = 256
)

func describePyTo(b *strings.Builder, v any, depth int) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case string:
		b.WriteString(shortQuote(x))
	case int64, bool, float64:
		fmt.Fprint(b, x)
	case pyGlobal:
		b.WriteString(x.String())
	case pyTuple:
		if depth == describeDepth {
			b.WriteString("(...)")
			return
		}
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if i == 8 || b.Len() > describeBytes {
				b.WriteString("...")
				break
			}
			describePyTo(b, e, depth+1)
		}
		b.WriteByte(')')
	default:
		b.WriteString(pyTypeName(v))
	}
}

func shortQuote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q...", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
