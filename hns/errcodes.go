package hns

// Windows error codes HNS returns, and the ErrorKind each means. The
// numbers are Win32 errors and HCN HRESULTs (facility 0x3B) as defined in
// winerror.h; they live here, untagged, so the mapping is tested on every OS.
var errorCodeKinds = []struct {
	code uint32
	kind ErrorKind
	name string
}{
	{0x00000490, KindNotFound, "ERROR_NOT_FOUND"},
	{0x803B0001, KindNotFound, "HCN_E_NETWORK_NOT_FOUND"},
	{0x803B0002, KindNotFound, "HCN_E_ENDPOINT_NOT_FOUND"},
	{0x803B0005, KindNotFound, "HCN_E_SUBNET_NOT_FOUND"},
	{0x803B0006, KindNotFound, "HCN_E_ADAPTER_NOT_FOUND"},
	{0x803B0007, KindNotFound, "HCN_E_PORT_NOT_FOUND"},
	{0x803B0008, KindNotFound, "HCN_E_POLICY_NOT_FOUND"},
	{0x000000B7, KindAlreadyExists, "ERROR_ALREADY_EXISTS"},
	{0x803B0010, KindAlreadyExists, "HCN_E_NETWORK_ALREADY_EXISTS"},
	{0x803B0012, KindAlreadyExists, "HCN_E_POLICY_ALREADY_EXISTS"},
	{0x803B0014, KindAlreadyExists, "HCN_E_ENDPOINT_ALREADY_ATTACHED"},
	{0x803B002B, KindAlreadyExists, "HCN_E_ENDPOINT_NAMESPACE_ALREADY_EXISTS"},
	{0x803B0013, KindPortAlreadyExists, "HCN_E_PORT_ALREADY_EXISTS"},
	{0x80004001, KindNotSupported, "E_NOTIMPL"},
	{0x803B0015, KindNotSupported, "HCN_E_REQUEST_UNSUPPORTED"},
	{0x803B0016, KindNotSupported, "HCN_E_MAPPING_NOT_SUPPORTED"},
	{0x000006BA, KindTransient, "RPC_S_SERVER_UNAVAILABLE"},
	{0x000006BE, KindTransient, "RPC_S_CALL_FAILED"},
	{0x00000426, KindTransient, "ERROR_SERVICE_NOT_ACTIVE"},
	{0x803B0020, KindTransient, "HCN_E_MANAGER_STOPPED"},
	{0x803B000A, KindInvalid, "HCN_E_INVALID_NETWORK"},
	{0x803B000B, KindInvalid, "HCN_E_INVALID_NETWORK_TYPE"},
	{0x803B000C, KindInvalid, "HCN_E_INVALID_ENDPOINT"},
	{0x803B000D, KindInvalid, "HCN_E_INVALID_POLICY"},
	{0x803B000E, KindInvalid, "HCN_E_INVALID_POLICY_TYPE"},
	{0x803B000F, KindInvalid, "HCN_E_INVALID_REMOTE_ENDPOINT_OPERATION"},
	{0x803B001B, KindInvalid, "HCN_E_INVALID_JSON"},
	{0x803B001E, KindInvalid, "HCN_E_INVALID_IP"},
	{0x803B002D, KindInvalid, "HCN_E_INVALID_INTERNAL_PORT"},
	{0x00000057, KindInvalid, "ERROR_INVALID_PARAMETER"}, // E_INVALIDARG: hcn reports HRESULT_FROM_WIN32(x) as x
	{0x803B002C, KindInUse, "HCN_E_ENTITY_HAS_REFERENCES"},
}

// Codes the simulator returns, named so a rule and its test say which
// real error they mean.
const (
	// CodeInvalidParameter is E_INVALIDARG (0x80070057) as hcn reports
	// it: HNS's answer to a load balancer with more backends than the
	// host allows ("invalid number of destinations", kubernetes issue
	// 98680).
	CodeInvalidParameter uint32 = 0x00000057
	// CodeAlreadyExists is ERROR_ALREADY_EXISTS: creating a load balancer
	// that HNS restored from its backup after a restart (kubernetes issue
	// 139519, "Cannot create a file when that file already exists.
	// (0xb7)").
	CodeAlreadyExists uint32 = 0x000000B7
	// CodePortAlreadyExists is HCN_E_PORT_ALREADY_EXISTS: a frontend
	// another load balancer holds (kubernetes PR 137530).
	CodePortAlreadyExists uint32 = 0x803B0013
	// CodeServerUnavailable is RPC_S_SERVER_UNAVAILABLE, what a call to a
	// stopped HNS service fails with. Issue 139519 says only that every
	// call fails while HNS restarts, not with which code: this is the
	// Win32 error for an RPC server that is not running, classified
	// transient like every code of that family.
	CodeServerUnavailable uint32 = 0x000006BA
)

// codeName returns the winerror.h name of code, or "".
func codeName(code uint32) string {
	_, name := kindForCode(code)
	return name
}

// kindForCode maps a Windows error code to its kind.
func kindForCode(code uint32) (ErrorKind, string) {
	for _, c := range errorCodeKinds {
		if c.code == code {
			return c.kind, c.name
		}
	}
	return KindUnknown, ""
}
