/*
 * Stand-in computenetwork.dll for Wine, which has no HNS. Without it every
 * hcn call fails with ERROR_MOD_NOT_FOUND, so tests could never see how a
 * real HNS error travels through hcn. Every function here fails with one
 * HRESULT: the value of NODENET_FAKE_HCN_HRESULT (e.g. 0x803B0013), read on
 * each call so a test can change it, or HRESULT_FROM_WIN32(
 * ERROR_MOD_NOT_FOUND) when unset, which keeps the "no HNS here" answer the
 * prefix gives without the stub. Output parameters are never written: hcn
 * reads them only on success.
 */
#include <windows.h>
#include <stdlib.h>

static HRESULT fake_hresult(void)
{
	char buf[32], *end;
	unsigned long v;
	DWORD n = GetEnvironmentVariableA("NODENET_FAKE_HCN_HRESULT", buf, sizeof buf);

	if (n == 0 || n >= sizeof buf)
		return HRESULT_FROM_WIN32(ERROR_MOD_NOT_FOUND);
	v = strtoul(buf, &end, 0);
	/* Failures only: success would make hcn parse output never written. */
	if (*end != '\0' || !(v & 0x80000000UL))
		return E_FAIL;
	return (HRESULT)v;
}

/* The x64 calling convention lets a callee ignore its arguments. */
#define FAKE(name) \
	HRESULT WINAPI name(void) { return fake_hresult(); }

FAKE(HcnCloseEndpoint)
FAKE(HcnCloseLoadBalancer)
FAKE(HcnCloseNamespace)
FAKE(HcnCloseNetwork)
FAKE(HcnCloseSdnRoute)
FAKE(HcnCreateEndpoint)
FAKE(HcnCreateLoadBalancer)
FAKE(HcnCreateNamespace)
FAKE(HcnCreateNetwork)
FAKE(HcnCreateSdnRoute)
FAKE(HcnDeleteEndpoint)
FAKE(HcnDeleteLoadBalancer)
FAKE(HcnDeleteNamespace)
FAKE(HcnDeleteNetwork)
FAKE(HcnDeleteSdnRoute)
FAKE(HcnEnumerateEndpoints)
FAKE(HcnEnumerateLoadBalancers)
FAKE(HcnEnumerateNamespaces)
FAKE(HcnEnumerateNetworks)
FAKE(HcnEnumerateSdnRoutes)
FAKE(HcnModifyEndpoint)
FAKE(HcnModifyLoadBalancer)
FAKE(HcnModifyNamespace)
FAKE(HcnModifyNetwork)
FAKE(HcnModifySdnRoute)
FAKE(HcnOpenEndpoint)
FAKE(HcnOpenLoadBalancer)
FAKE(HcnOpenNamespace)
FAKE(HcnOpenNetwork)
FAKE(HcnOpenSdnRoute)
FAKE(HcnQueryEndpointProperties)
FAKE(HcnQueryLoadBalancerProperties)
FAKE(HcnQueryNamespaceProperties)
FAKE(HcnQueryNetworkProperties)
FAKE(HcnQuerySdnRouteProperties)

/* Lets tests tell this stub from a real HNS. */
BOOL WINAPI NodenetFakeHcn(void)
{
	return TRUE;
}
