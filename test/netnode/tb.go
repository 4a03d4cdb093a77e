package netnode

import "context"

// TB is the part of testing.TB this package uses. *testing.T and
// *testing.B satisfy it; a program (a demo, a benchmark driver) can too,
// which testing.TB forbids with its private method.
//
// Fatal and Fatalf must not return: tests end the goroutine
// (runtime.Goexit), a program may panic and recover at its top. Cleanup
// functions run last-in first-out once the caller is done.
type TB interface {
	Helper()
	Cleanup(func())
	Context() context.Context
	TempDir() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
