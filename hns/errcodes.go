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

// kindForCode maps a Windows error code to its kind.
func kindForCode(code uint32) (ErrorKind, string) {
	for _, c := range errorCodeKinds {
		if c.code == code {
			return c.kind, c.name
		}
	}
	return KindUnknown, ""
}
