package gpt2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
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

// pickle opcodes, by name as in CPython's pickletools.
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opBinFloat       = 'G'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opBinString      = 'T'
	opShortBinString = 'U'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opAppends        = 'e'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opList           = 'l'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opSetItems       = 'u'
	opEmptyDict      = '}'
	opEmptyList      = ']'
	opEmptyTuple     = ')'
	opBinBytes       = 'B'
	opShortBinBytes  = 'C'
	opProto          = 0x80
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
)

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
		switch c[0] {
		case opStop:
			if len(m.marks) > 0 {
				return nil, fmt.Errorf("STOP inside an unclosed MARK")
			}
			if len(m.stack) != 1 {
				return nil, fmt.Errorf("STOP with %d values on the stack, want 1", len(m.stack))
			}
			return m.stack[0], nil
		case opProto:
			v, err := m.read(1)
			if err != nil {
				return nil, err
			}
			if v[0] < 2 || v[0] > 5 {
				return nil, fmt.Errorf("pickle protocol %d is not supported (2 to 5 are)", v[0])
			}
		case opFrame:
			if _, err := m.read(8); err != nil { // a hint for buffered readers
				return nil, err
			}
		case opMark:
			m.marks = append(m.marks, len(m.stack))
		case opPop:
			if _, err := m.pop(); err != nil {
				return nil, err
			}
		case opPopMark:
			if _, err := m.popMark(); err != nil {
				return nil, err
			}
		case opDup:
			v, err := m.top()
			if err != nil {
				return nil, err
			}
			m.push(v)
		case opNone:
			m.push(nil)
		case opNewTrue:
			m.push(true)
		case opNewFalse:
			m.push(false)
		case opBinInt:
			b, err := m.read(4)
			if err != nil {
				return nil, err
			}
			m.push(int64(int32(binary.LittleEndian.Uint32(b))))
		case opBinInt1:
			b, err := m.read(1)
			if err != nil {
				return nil, err
			}
			m.push(int64(b[0]))
		case opBinInt2:
			b, err := m.read(2)
			if err != nil {
				return nil, err
			}
			m.push(int64(binary.LittleEndian.Uint16(b)))
		case opLong1, opLong4:
			n, err := m.length(lengthWidth[c[0]])
			if err != nil {
				return nil, err
			}
			if n > pickleMaxLongBytes {
				return nil, fmt.Errorf("integer of %d bytes is too long (at most %d)", n, pickleMaxLongBytes)
			}
			b, err := m.read(n)
			if err != nil {
				return nil, err
			}
			m.push(decodeLong(b))
		case opBinFloat:
			b, err := m.read(8)
			if err != nil {
				return nil, err
			}
			m.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
		case opShortBinUni, opBinUnicode, opBinUnicode8:
			n, err := m.length(lengthWidth[c[0]])
			if err != nil {
				return nil, err
			}
			b, err := m.read(n)
			if err != nil {
				return nil, err
			}
			m.push(string(b))
		case opShortBinString, opBinString, opShortBinBytes, opBinBytes, opBinBytes8:
			n, err := m.length(lengthWidth[c[0]])
			if err != nil {
				return nil, err
			}
			b, err := m.read(n)
			if err != nil {
				return nil, err
			}
			if c[0] == opShortBinString || c[0] == opBinString {
				m.push(string(b)) // Python 2 str: torch reads it as text too
			} else {
				m.push(bytes.Clone(b))
			}
		case opEmptyTuple:
			m.push(pyTuple{})
		case opTuple:
			items, err := m.popMark()
			if err != nil {
				return nil, err
			}
			m.push(pyTuple(items))
		case opTuple1, opTuple2, opTuple3:
			n := int(c[0]-opTuple1) + 1
			if len(m.stack)-m.floor() < n {
				return nil, fmt.Errorf("TUPLE%d with %d values on the stack", n, len(m.stack)-m.floor())
			}
			items := append(pyTuple{}, m.stack[len(m.stack)-n:]...)
			m.stack = m.stack[:len(m.stack)-n]
			m.push(items)
		case opEmptyList:
			m.push(&pyList{})
		case opList:
			items, err := m.popMark()
			if err != nil {
				return nil, err
			}
			m.push(&pyList{items: items})
		case opAppend, opAppends:
			var items []any
			if c[0] == opAppend {
				v, err := m.pop()
				if err != nil {
					return nil, err
				}
				items = []any{v}
			} else if items, err = m.popMark(); err != nil {
				return nil, err
			}
			t, err := m.top()
			if err != nil {
				return nil, err
			}
			l, ok := t.(*pyList)
			if !ok {
				return nil, fmt.Errorf("APPEND to a %s, not a list", pyTypeName(t))
			}
			l.items = append(l.items, items...)
		case opEmptyDict:
			m.push(&pyDict{})
		case opDict:
			items, err := m.popMark()
			if err != nil {
				return nil, err
			}
			d := &pyDict{}
			if err := setItems(d, items); err != nil {
				return nil, err
			}
			m.push(d)
		case opSetItem, opSetItems:
			var items []any
			if c[0] == opSetItem {
				if len(m.stack)-m.floor() < 3 {
					return nil, fmt.Errorf("SETITEM with %d values on the stack", len(m.stack)-m.floor())
				}
				items = append([]any{}, m.stack[len(m.stack)-2:]...)
				m.stack = m.stack[:len(m.stack)-2]
			} else if items, err = m.popMark(); err != nil {
				return nil, err
			}
			t, err := m.top()
			if err != nil {
				return nil, err
			}
			d, ok := t.(*pyDict)
			if !ok {
				return nil, fmt.Errorf("SETITEM on a %s, not a dict", pyTypeName(t))
			}
			if err := setItems(d, items); err != nil {
				return nil, err
			}
		case opBinPut, opLongBinPut, opMemoize:
			var idx uint64
			switch c[0] {
			case opBinPut:
				b, err := m.read(1)
				if err != nil {
					return nil, err
				}
				idx = uint64(b[0])
			case opLongBinPut:
				b, err := m.read(4)
				if err != nil {
					return nil, err
				}
				idx = uint64(binary.LittleEndian.Uint32(b))
			default:
				idx = uint64(len(m.memo))
			}
			v, err := m.top()
			if err != nil {
				return nil, err
			}
			m.memo[idx] = v
		case opBinGet, opLongBinGet:
			var idx uint64
			if c[0] == opBinGet {
				b, err := m.read(1)
				if err != nil {
					return nil, err
				}
				idx = uint64(b[0])
			} else {
				b, err := m.read(4)
				if err != nil {
					return nil, err
				}
				idx = uint64(binary.LittleEndian.Uint32(b))
			}
			v, ok := m.memo[idx]
			if !ok {
				return nil, fmt.Errorf("memo entry %d was never stored", idx)
			}
			m.push(v)
		case opGlobal:
			module, err := m.line()
			if err != nil {
				return nil, err
			}
			name, err := m.line()
			if err != nil {
				return nil, err
			}
			m.push(pyGlobal{module, name})
		case opStackGlobal:
			name, err1 := m.pop()
			module, err2 := m.pop()
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("STACK_GLOBAL needs two values on the stack")
			}
			ms, ok1 := module.(string)
			ns, ok2 := name.(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("STACK_GLOBAL of a %s and a %s, not two strings", pyTypeName(module), pyTypeName(name))
			}
			m.push(pyGlobal{ms, ns})
		case opReduce:
			args, err1 := m.pop()
			fn, err2 := m.pop()
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("REDUCE needs two values on the stack")
			}
			g, ok := fn.(pyGlobal)
			if !ok {
				return nil, fmt.Errorf("REDUCE calls a %s, not a global", pyTypeName(fn))
			}
			t, ok := args.(pyTuple)
			if !ok {
				return nil, fmt.Errorf("REDUCE of %s with a %s, not a tuple of arguments", g, pyTypeName(args))
			}
			v, err := m.hooks.call(g, t)
			if err != nil {
				return nil, err
			}
			m.push(v)
		case opBuild:
			state, err1 := m.pop()
			obj, err2 := m.pop()
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("BUILD needs two values on the stack")
			}
			v, err := m.hooks.build(obj, state)
			if err != nil {
				return nil, err
			}
			m.push(v)
		case opBinPersID:
			pid, err := m.pop()
			if err != nil {
				return nil, err
			}
			v, err := m.hooks.persistentLoad(pid)
			if err != nil {
				return nil, err
			}
			m.push(v)
		default:
			if m.data[m.start] != opProto {
				// Protocols 0 and 1 have no PROTO opcode, and write text
				// opcodes (INT for a bool, LONG, PUT, ...) that 2 and later
				// replace; torch.save writes them with pickle_protocol=1.
				return nil, fmt.Errorf("opcode 0x%02x of a pickle of protocol 0 or 1 (no PROTO opcode at its start) is not supported: protocols 2 to 5 are (torch.save's default is 2)", c[0])
			}
			return nil, fmt.Errorf("opcode 0x%02x is not supported (a checkpoint of tensors needs only data opcodes)", c[0])
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

// lengthWidth is the size in bytes of the length that precedes the value
// of each length-prefixed opcode.
var lengthWidth = map[byte]int{
	opLong1: 1, opLong4: 4,
	opShortBinUni: 1, opBinUnicode: 4, opBinUnicode8: 8,
	opShortBinString: 1, opBinString: 4,
	opShortBinBytes: 1, opBinBytes: 4, opBinBytes8: 8,
}

// length reads a little-endian length of width bytes (1, 4 or 8) and
// checks that that many bytes follow.
func (m *pickleMachine) length(width int) (int, error) {
	b, err := m.read(width)
	if err != nil {
		return 0, err
	}
	var n uint64
	switch width {
	case 1:
		n = uint64(b[0])
	case 4:
		n = uint64(binary.LittleEndian.Uint32(b))
	default:
		n = binary.LittleEndian.Uint64(b)
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
