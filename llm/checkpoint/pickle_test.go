package checkpoint

import (
	"math/big"
	"strings"
	"testing"
)

func TestDecodeLong(t *testing.T) {
	big80, _ := new(big.Int).SetString("-604462909807314587353088", 10) // -2**79
	tests := []struct {
		in   []byte
		want any
	}{
		{nil, int64(0)},
		{[]byte{0xff}, int64(-1)},
		{[]byte{0x7f}, int64(127)},
		{[]byte{0x80}, int64(-128)},
		{[]byte{0x00, 0x80}, int64(-32768)},
		{[]byte{0xff, 0x00}, int64(255)},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0x80}, int64(-1 << 63)},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0x80, 0xff}, int64(-1 << 63)}, // 9 bytes that fit
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}, big80},
	}
	for _, tt := range tests {
		got := decodeLong(tt.in)
		if b, ok := tt.want.(*big.Int); ok {
			if g, ok := got.(*big.Int); !ok || g.Cmp(b) != 0 {
				t.Errorf("decodeLong(% x) = %v, want %v", tt.in, got, b)
			}
		} else if got != tt.want {
			t.Errorf("decodeLong(% x) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestUnpickleRefuses: opcodes and names outside the data-only subset end
// the unpickling with an error that says what and where.
func TestUnpickleRefuses(t *testing.T) {
	tests := []struct {
		name, pickle, want string
	}{
		{"INST runs a class", "\x80\x02(ios\nsystem\n.", "opcode 0x69 is not supported"},
		{"REDUCE of an unknown global", "\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "refusing to call builtins.eval"},
		{"STACK_GLOBAL too", "\x80\x04\x8c\x08builtins\x8c\x04exec\x93)R.", "refusing to call builtins.exec"},
		{"memo never stored", "\x80\x02h\x05.", "memo entry 5 was never stored"},
		{"stack underflow", "\x80\x020.", "stack underflow"},
		{"values left", "\x80\x02K\x01K\x02.", "STOP with 2 values"},
		{"no STOP", "\x80\x02K\x01", "truncated"},
		{"protocol 1", "\x80\x01K\x01.", "pickle protocol 1"},
		{"protocol 1 without PROTO", "(I01\nt.", "opcode 0x49 of a pickle of protocol 0 or 1"},
		{"dict key a tuple", "\x80\x02}(K\x01\x85K\x02u.", "dict key of type tuple"},
		{"string past the end", "\x80\x02X\xff\x00\x00\x00ab.", "truncated"},
		{"huge integer", "\x80\x02\x8b\x00\x00\x01\x00" + strings.Repeat("\x01", 65536) + ".", "integer of 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &torchUnpickler{storages: map[string]*torchStorage{}}
			_, _, err := unpickle([]byte(tt.pickle), 0, u.hooks())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "pickle at byte") {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestUnpickleErrorsAreShort: an error that quotes a pickled value (here a
// persistent id that is not a storage reference) stays short however the
// value is built. Eight references to one tuple, nested, cost 20 bytes a
// level in the pickle and 8^depth elements to print in full (5 levels:
// a 140 KB error; 10 levels, 200 bytes of pickle: gigabytes), and a tuple
// nested a million deep costs a byte a level.
func TestUnpickleErrorsAreShort(t *testing.T) {
	fanOut := "\x80\x02)q\x00" + strings.Repeat("("+strings.Repeat("h\x00", 8)+"tq\x00", 5) + "Q."
	deep := "\x80\x02)" + strings.Repeat("\x85", 100000) + "Q." // ((((...),),),)
	for name, p := range map[string]string{"fan-out": fanOut, "deep": deep} {
		t.Run(name, func(t *testing.T) {
			u := &torchUnpickler{storages: map[string]*torchStorage{}}
			_, _, err := unpickle([]byte(p), 0, u.hooks())
			if err == nil || !strings.Contains(err.Error(), "is not a storage reference") {
				t.Fatalf("err = %.200v, want a persistent id that is not a storage reference", err)
			}
			if len(err.Error()) > 2000 {
				t.Fatalf("error of %d bytes: %.200s...", len(err.Error()), err)
			}
			t.Log(err)
		})
	}
}

// TestUnpickleValueBound: a pickle of nothing but one-byte EMPTY_LIST
// opcodes (50 bytes of memory each) is refused once it has built
// pickleMaxValues values, not after some GB.
func TestUnpickleValueBound(t *testing.T) {
	defer func(n int) { pickleMaxValues = n }(pickleMaxValues)
	pickleMaxValues = 1000
	p := "\x80\x02" + strings.Repeat("]", pickleMaxValues+10) + "."
	u := &torchUnpickler{storages: map[string]*torchStorage{}}
	_, _, err := unpickle([]byte(p), 0, u.hooks())
	if err == nil || !strings.Contains(err.Error(), "builds more than") {
		t.Fatalf("err = %v", err)
	}
}
