package hns

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrorKind classifies an HNS failure the way callers must react to it.
type ErrorKind int

// Error kinds.
const (
	// KindUnknown is an HNS failure nodenet has no rule for.
	KindUnknown ErrorKind = iota
	// KindNotFound: the object does not exist.
	KindNotFound
	// KindAlreadyExists: an object with that name or address exists.
	KindAlreadyExists
	// KindPortAlreadyExists: a load balancer already serves that
	// frontend VIP, protocol and port (HCN_E_PORT_ALREADY_EXISTS).
	KindPortAlreadyExists
	// KindNotSupported: this HNS version lacks the feature or flag.
	KindNotSupported
	// KindTransient: HNS is unavailable (service restarting, RPC failure);
	// retry later and never conclude the object is absent.
	KindTransient
	// KindInvalid: HNS rejected the request's content.
	KindInvalid
	// KindInUse: the object is still referenced (a network with
	// endpoints, an endpoint behind a load balancer).
	KindInUse
)

var kindNames = map[ErrorKind]string{
	KindUnknown:           "unknown",
	KindNotFound:          "not found",
	KindAlreadyExists:     "already exists",
	KindPortAlreadyExists: "port already exists",
	KindNotSupported:      "not supported",
	KindTransient:         "transient",
	KindInvalid:           "invalid",
	KindInUse:             "in use",
}

func (k ErrorKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Error is the error every Interface method returns.
type Error struct {
	// Op is the operation that failed.
	Op Op
	// Kind classifies the failure.
	Kind ErrorKind
	// Object names what the operation was about (an ID, name or address).
	Object string
	// Msg says what HNS objected to.
	Msg string
	// Code is the Windows error code HNS returned (a Win32 error, or an
	// HCN HRESULT; see errcodes.go), 0 when none is known.
	Code uint32
	// Err is the underlying error (the hcn error on Windows), if any.
	Err error
}

func (e *Error) Error() string {
	s := string(e.Op)
	if e.Object != "" {
		s += " " + e.Object
	}
	s += ": " + e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Code != 0 {
		s += fmt.Sprintf(" (0x%x %s)", e.Code, codeName(e.Code))
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func newError(op Op, kind ErrorKind, object, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Object: object, Msg: fmt.Sprintf(format, args...)}
}

// codedError is an error HNS reports with a Windows error code: the kind
// follows from the code (errcodes.go), so the simulator cannot give a
// code one meaning and the real client another.
func codedError(op Op, code uint32, object, format string, args ...any) *Error {
	kind, _ := kindForCode(code)
	return &Error{Op: op, Kind: kind, Object: object, Msg: fmt.Sprintf(format, args...), Code: code}
}

// CodeOf returns the Windows error code of an HNS error anywhere in err's
// chain, or 0.
func CodeOf(err error) uint32 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// KindOf returns the kind of an HNS error anywhere in err's chain, or
// KindUnknown.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUnknown
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsAlreadyExists reports whether err says the object already exists.
func IsAlreadyExists(err error) bool { return KindOf(err) == KindAlreadyExists }

// IsPortAlreadyExists reports whether err says the frontend is taken.
func IsPortAlreadyExists(err error) bool { return KindOf(err) == KindPortAlreadyExists }

// IsNotSupported reports whether err says HNS lacks the feature.
func IsNotSupported(err error) bool { return KindOf(err) == KindNotSupported }

// IsTransient reports whether err is worth retrying unchanged.
func IsTransient(err error) bool { return KindOf(err) == KindTransient }

// IsInvalid reports whether HNS rejected the request's content.
func IsInvalid(err error) bool { return KindOf(err) == KindInvalid }

// IsInUse reports whether the object is still referenced.
func IsInUse(err error) bool { return KindOf(err) == KindInUse }
