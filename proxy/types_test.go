package proxy

import (
	"net/netip"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestServicePortEqualCoversEveryField keeps Equal in step with
// ServicePort: changing any one field must make ports unequal.
func TestServicePortEqualCoversEveryField(t *testing.T) {
	base := ServicePort{}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			changed := base
			v := reflect.ValueOf(&changed).Elem().Field(i)
			switch v.Kind() {
			case reflect.Slice:
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
				setNonZero(t, v.Index(0))
			default:
				setNonZero(t, v)
			}
			if base.Equal(&changed) {
				t.Errorf("Equal ignores field %s", f.Name)
			}
		})
	}
}

// setNonZero sets v to a non-zero value of its type.
func setNonZero(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint16:
		v.SetUint(1)
	case reflect.Struct:
		switch v.Interface().(type) {
		case ServicePortKey:
			v.Set(reflect.ValueOf(ServicePortKey{ServicePortName: ServicePortName{NamespacedName: types.NamespacedName{Namespace: "x", Name: "y"}}, Family: IPv4}))
		default:
			if v.Type().PkgPath() == "net/netip" {
				switch v.Type().Name() {
				case "Addr":
					v.Set(reflect.ValueOf(netip.MustParseAddr("10.0.0.1")))
				case "Prefix":
					v.Set(reflect.ValueOf(netip.MustParsePrefix("10.0.0.0/8")))
				}
				return
			}
			setNonZero(t, v.Field(0))
		}
	default:
		t.Fatalf("no non-zero value for kind %s", v.Kind())
	}
}
