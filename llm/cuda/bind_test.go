package cuda

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestBindingSignatures registers every C function field of the bindings
// against a dummy address: purego checks the Go signature's argument and
// return types at registration (and panics on one it cannot pass), so a
// wrong type is caught here rather than on the first GPU machine. Nothing
// is called.
func TestBindingSignatures(t *testing.T) {
	for _, v := range []any{&Driver{}, &CuBLAS{}, &NVRTC{}} {
		rv := reflect.ValueOf(v).Elem()
		n := 0
		for i := range rv.NumField() {
			f := rv.Field(i)
			if f.Kind() != reflect.Func {
				continue
			}
			name := rv.Type().Field(i).Name
			fptr := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Interface()
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%T.%s: purego rejects the signature: %v", v, name, r)
					}
				}()
				purego.RegisterFunc(fptr, 1)
			}()
			n++
		}
		t.Logf("%T: %d functions", v, n)
	}
}
