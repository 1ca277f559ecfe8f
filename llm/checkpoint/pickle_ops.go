package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// The opcodes pickleMachine runs, one small function each. Anything not
// in pickleOps (INST, OBJ, NEWOBJ, EXT*, the text opcodes of protocols 0
// and 1, ...) ends the unpickling with an error.

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

// lengthWidth is the size in bytes of the length that precedes the value
// of each length-prefixed opcode.
var lengthWidth = map[byte]int{
	opLong1: 1, opLong4: 4,
	opShortBinUni: 1, opBinUnicode: 4, opBinUnicode8: 8,
	opShortBinString: 1, opBinString: 4,
	opShortBinBytes: 1, opBinBytes: 4, opBinBytes8: 8,
}

// memoIndexWidth is the size in bytes of the memo index that follows each
// opcode with one.
var memoIndexWidth = map[byte]int{opBinPut: 1, opLongBinPut: 4, opBinGet: 1, opLongBinGet: 4}

// pickleOp runs one opcode, whose byte is op, on m.
type pickleOp func(m *pickleMachine, op byte) error

// pickleOps is every opcode the machine runs. STOP is the run loop's own.
var pickleOps [256]pickleOp

func init() {
	for op, run := range map[byte]pickleOp{
		opProto: opProtoVersion, opFrame: opSkipFrame,
		opMark: opPushMark, opPop: opDiscard, opPopMark: opDiscardToMark, opDup: opDuplicate,
		opNone: opConst, opNewTrue: opConst, opNewFalse: opConst,
		opBinInt: opInt, opBinInt1: opInt, opBinInt2: opInt,
		opLong1: opLong, opLong4: opLong, opBinFloat: opFloat,
		opShortBinUni: opText, opBinUnicode: opText, opBinUnicode8: opText,
		opShortBinString: opText, opBinString: opText,
		opShortBinBytes: opBytes, opBinBytes: opBytes, opBinBytes8: opBytes,
		opEmptyTuple: opMakeTuple, opTuple: opMakeTuple, opTuple1: opMakeTuple, opTuple2: opMakeTuple, opTuple3: opMakeTuple,
		opEmptyList: opMakeList, opList: opMakeList, opAppend: opAppendTo, opAppends: opAppendTo,
		opEmptyDict: opMakeDict, opDict: opMakeDict, opSetItem: opSetItemsOf, opSetItems: opSetItemsOf,
		opBinPut: opMemoPut, opLongBinPut: opMemoPut, opMemoize: opMemoPut,
		opBinGet: opMemoGet, opLongBinGet: opMemoGet,
		opGlobal: opGlobalName, opStackGlobal: opGlobalName,
		opReduce: opCall, opBuild: opBuildState, opBinPersID: opPersistent,
	} {
		pickleOps[op] = run
	}
}

func opProtoVersion(m *pickleMachine, _ byte) error {
	v, err := m.uint(1)
	if err != nil {
		return err
	}
	if v < 2 || v > 5 {
		return fmt.Errorf("pickle protocol %d is not supported (2 to 5 are)", v)
	}
	return nil
}

// opSkipFrame skips FRAME's length: a hint for buffered readers.
func opSkipFrame(m *pickleMachine, _ byte) error {
	_, err := m.read(8)
	return err
}

func opPushMark(m *pickleMachine, _ byte) error {
	m.marks = append(m.marks, len(m.stack))
	return nil
}

func opDiscard(m *pickleMachine, _ byte) error {
	_, err := m.pop()
	return err
}

func opDiscardToMark(m *pickleMachine, _ byte) error {
	_, err := m.popMark()
	return err
}

func opDuplicate(m *pickleMachine, _ byte) error {
	v, err := m.top()
	if err != nil {
		return err
	}
	m.push(v)
	return nil
}

func opConst(m *pickleMachine, op byte) error {
	switch op {
	case opNone:
		m.push(nil)
	case opNewTrue:
		m.push(true)
	default:
		m.push(false)
	}
	return nil
}

func opInt(m *pickleMachine, op byte) error {
	switch op {
	case opBinInt:
		v, err := m.uint(4)
		if err != nil {
			return err
		}
		m.push(int64(int32(v)))
	case opBinInt1:
		v, err := m.uint(1)
		if err != nil {
			return err
		}
		m.push(int64(v))
	default:
		v, err := m.uint(2)
		if err != nil {
			return err
		}
		m.push(int64(v))
	}
	return nil
}

func opLong(m *pickleMachine, op byte) error {
	n, err := m.length(lengthWidth[op])
	if err != nil {
		return err
	}
	if n > pickleMaxLongBytes {
		return fmt.Errorf("integer of %d bytes is too long (at most %d)", n, pickleMaxLongBytes)
	}
	b, err := m.read(n)
	if err != nil {
		return err
	}
	m.push(decodeLong(b))
	return nil
}

func opFloat(m *pickleMachine, _ byte) error {
	b, err := m.read(8)
	if err != nil {
		return err
	}
	m.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
	return nil
}

// opText reads a str (and a Python 2 str, which torch reads as text too).
func opText(m *pickleMachine, op byte) error {
	b, err := m.prefixed(op)
	if err != nil {
		return err
	}
	m.push(string(b))
	return nil
}

func opBytes(m *pickleMachine, op byte) error {
	b, err := m.prefixed(op)
	if err != nil {
		return err
	}
	m.push(bytes.Clone(b))
	return nil
}

func opMakeTuple(m *pickleMachine, op byte) error {
	var items []any
	switch op {
	case opEmptyTuple:
	case opTuple:
		var err error
		if items, err = m.popMark(); err != nil {
			return err
		}
	default: // TUPLE1, TUPLE2, TUPLE3
		var err error
		if items, err = m.popN(int(op-opTuple1) + 1); err != nil {
			return err
		}
	}
	m.push(pyTuple(items))
	return nil
}

func opMakeList(m *pickleMachine, op byte) error {
	l := &pyList{}
	if op == opList {
		var err error
		if l.items, err = m.popMark(); err != nil {
			return err
		}
	}
	m.push(l)
	return nil
}

// itemsFor pops what APPEND/SETITEM (n values) or APPENDS/SETITEMS (the
// values since the last MARK) add to a container.
func (m *pickleMachine) itemsFor(single bool, n int) ([]any, error) {
	if single {
		return m.popN(n)
	}
	return m.popMark()
}

func opAppendTo(m *pickleMachine, op byte) error {
	items, err := m.itemsFor(op == opAppend, 1)
	if err != nil {
		return err
	}
	t, err := m.top()
	if err != nil {
		return err
	}
	l, ok := t.(*pyList)
	if !ok {
		return fmt.Errorf("APPEND to a %s, not a list", pyTypeName(t))
	}
	l.items = append(l.items, items...)
	return nil
}

func opMakeDict(m *pickleMachine, op byte) error {
	d := &pyDict{}
	if op == opDict {
		items, err := m.popMark()
		if err != nil {
			return err
		}
		if err := setItems(d, items); err != nil {
			return err
		}
	}
	m.push(d)
	return nil
}

func opSetItemsOf(m *pickleMachine, op byte) error {
	items, err := m.itemsFor(op == opSetItem, 2)
	if err != nil {
		return err
	}
	t, err := m.top()
	if err != nil {
		return err
	}
	d, ok := t.(*pyDict)
	if !ok {
		return fmt.Errorf("SETITEM on a %s, not a dict", pyTypeName(t))
	}
	return setItems(d, items)
}

func opMemoPut(m *pickleMachine, op byte) error {
	idx := uint64(len(m.memo)) // MEMOIZE: the next index
	if op != opMemoize {
		var err error
		if idx, err = m.uint(memoIndexWidth[op]); err != nil {
			return err
		}
	}
	v, err := m.top()
	if err != nil {
		return err
	}
	m.memo[idx] = v
	return nil
}

func opMemoGet(m *pickleMachine, op byte) error {
	idx, err := m.uint(memoIndexWidth[op])
	if err != nil {
		return err
	}
	v, ok := m.memo[idx]
	if !ok {
		return fmt.Errorf("memo entry %d was never stored", idx)
	}
	m.push(v)
	return nil
}

// opGlobalName pushes a name (GLOBAL's two lines, or STACK_GLOBAL's two
// strings): nothing is imported.
func opGlobalName(m *pickleMachine, op byte) error {
	if op == opGlobal {
		module, err := m.line()
		if err != nil {
			return err
		}
		name, err := m.line()
		if err != nil {
			return err
		}
		m.push(pyGlobal{module, name})
		return nil
	}
	name, err1 := m.pop()
	module, err2 := m.pop()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("STACK_GLOBAL needs two values on the stack")
	}
	ms, ok1 := module.(string)
	ns, ok2 := name.(string)
	if !ok1 || !ok2 {
		return fmt.Errorf("STACK_GLOBAL of a %s and a %s, not two strings", pyTypeName(module), pyTypeName(name))
	}
	m.push(pyGlobal{ms, ns})
	return nil
}

// opCall is REDUCE, which the hooks decide.
func opCall(m *pickleMachine, _ byte) error {
	args, err1 := m.pop()
	fn, err2 := m.pop()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("REDUCE needs two values on the stack")
	}
	g, ok := fn.(pyGlobal)
	if !ok {
		return fmt.Errorf("REDUCE calls a %s, not a global", pyTypeName(fn))
	}
	t, ok := args.(pyTuple)
	if !ok {
		return fmt.Errorf("REDUCE of %s with a %s, not a tuple of arguments", g, pyTypeName(args))
	}
	v, err := m.hooks.call(g, t)
	if err != nil {
		return err
	}
	m.push(v)
	return nil
}

func opBuildState(m *pickleMachine, _ byte) error {
	state, err1 := m.pop()
	obj, err2 := m.pop()
	if err1 != nil || err2 != nil {
		return fmt.Errorf("BUILD needs two values on the stack")
	}
	v, err := m.hooks.build(obj, state)
	if err != nil {
		return err
	}
	m.push(v)
	return nil
}

func opPersistent(m *pickleMachine, _ byte) error {
	pid, err := m.pop()
	if err != nil {
		return err
	}
	v, err := m.hooks.persistentLoad(pid)
	if err != nil {
		return err
	}
	m.push(v)
	return nil
}
