/*
 * Stub bcryptprimitives.dll for Wine 8, which lacks it. The Go runtime
 * (1.22+) imports ProcessPrng from it for all randomness, so no Windows Go
 * binary starts without it. RtlGenRandom (advapi32's SystemFunction036)
 * gives the same guarantee Go needs: it never fails for valid arguments.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	/* RtlGenRandom takes a ULONG length; feed larger requests in chunks. */
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
	(void)inst;
	(void)reason;
	(void)reserved;
	return TRUE;
}
