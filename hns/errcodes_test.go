package hns

import (
	"strings"
	"testing"
)

func TestKindForCode(t *testing.T) {
	tests := []struct {
		name     string
		code     uint32
		want     ErrorKind
		wantName string
	}{
		{"a taken frontend port is port already exists", 0x803B0013, KindPortAlreadyExists, "HCN_E_PORT_ALREADY_EXISTS"},
		{"an unavailable RPC server is transient", 0x000006BA, KindTransient, "RPC_S_SERVER_UNAVAILABLE"},
		{"a referenced entity is in use", 0x803B002C, KindInUse, "HCN_E_ENTITY_HAS_REFERENCES"},
		{"a missing network is not found", 0x803B0001, KindNotFound, "HCN_E_NETWORK_NOT_FOUND"},
		{"E_NOTIMPL is not supported", 0x80004001, KindNotSupported, "E_NOTIMPL"},
		{"a code nodenet has no rule for is unknown", 0x803B00FF, KindUnknown, ""},
		{"success is unknown", 0, KindUnknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, name := kindForCode(tt.code)
			if kind != tt.want || name != tt.wantName {
				t.Errorf("kindForCode(0x%08X) = %v %q, want %v %q", tt.code, kind, name, tt.want, tt.wantName)
			}
		})
	}
}

func TestErrorCodeTable(t *testing.T) {
	seenCode := map[uint32]string{}
	seenName := map[string]uint32{}
	for _, c := range errorCodeKinds {
		if prev, ok := seenCode[c.code]; ok {
			t.Errorf("code 0x%08X is listed twice (%s and %s); only the first counts", c.code, prev, c.name)
		}
		seenCode[c.code] = c.name
		if prev, ok := seenName[c.name]; ok {
			t.Errorf("%s is listed twice (0x%08X and 0x%08X)", c.name, prev, c.code)
		}
		seenName[c.name] = c.code
		if c.name == "" || c.kind == KindUnknown {
			t.Errorf("code 0x%08X needs a name and a kind other than unknown", c.code)
		}
		// hcn's syscall layer turns HRESULT_FROM_WIN32(x) (0x8007xxxx) back
		// into the Win32 code x before hcn.CheckErrorWithCode sees it, so a
		// code written in that form can never match.
		if c.code&0x1FFF0000 == 0x00070000 {
			t.Errorf("%s is written as HRESULT 0x%08X; hcn reports it as Win32 code 0x%08X", c.name, c.code, c.code&0xFFFF)
		}
	}
}

// TestSimulatorCodesAreTheRealOnes: each code the simulator returns is in
// the table the real client classifies with, under its winerror.h name,
// so a simulated failure is classified as the real one would be.
func TestSimulatorCodesAreTheRealOnes(t *testing.T) {
	for _, tc := range []struct {
		code     uint32
		wantName string
		want     ErrorKind
	}{
		{CodeInvalidParameter, "ERROR_INVALID_PARAMETER", KindInvalid},
		{CodeAlreadyExists, "ERROR_ALREADY_EXISTS", KindAlreadyExists},
		{CodePortAlreadyExists, "HCN_E_PORT_ALREADY_EXISTS", KindPortAlreadyExists},
		{CodeServerUnavailable, "RPC_S_SERVER_UNAVAILABLE", KindTransient},
	} {
		kind, name := kindForCode(tc.code)
		if kind != tc.want || name != tc.wantName {
			t.Errorf("0x%x is %v %q, want %v %q", tc.code, kind, name, tc.want, tc.wantName)
		}
		err := codedError(OpCreateLoadBalancer, tc.code, "x", "m")
		if KindOf(err) != tc.want || CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.wantName) {
			t.Errorf("codedError(0x%x) = %v (kind %v, code 0x%x)", tc.code, err, KindOf(err), CodeOf(err))
		}
	}
	// E_INVALIDARG is 0x80070057; hcn hands it over as the Win32 code.
	if CodeInvalidParameter != 0x80070057&0xFFFF {
		t.Errorf("CodeInvalidParameter = 0x%x, want E_INVALIDARG's Win32 code 0x57", CodeInvalidParameter)
	}
}
