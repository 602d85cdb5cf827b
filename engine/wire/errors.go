package wire

import (
	"errors"
	"fmt"
)

var (
	// ErrConnClosed is matched (errors.Is) by every error a request gets
	// because its connection died: a read or write failure, a protocol
	// violation, or Close. The underlying cause (io.EOF, a net error,
	// ErrCorrelationMismatch, ...) is matched as well.
	ErrConnClosed = errors.New("kafka connection closed")

	// ErrCorrelationMismatch is the cause of a connection failure when a
	// response arrives for a different request than the oldest one in
	// flight. The stream can no longer be trusted, so the connection dies.
	ErrCorrelationMismatch = errors.New("response correlation id mismatch")

	// ErrUnsupportedVersion is returned by Issue when the broker does not
	// advertise the request key, or only at versions kmirror cannot speak.
	ErrUnsupportedVersion = errors.New("request not supported by broker at a version kmirror speaks")

	// ErrAcksZero is returned by Issue for a Produce request with acks=0.
	// Such a request has no response, which would break the strict
	// request/response pairing the connection relies on; kmirror always
	// produces with acks=-1.
	ErrAcksZero = errors.New("produce with acks=0 is not supported")

	// ErrAuthFailed is matched (errors.Is) by every *AuthError.
	ErrAuthFailed = errors.New("sasl authentication failed")
)

// errClosedByCaller is the cause recorded when Close ends a healthy
// connection.
var errClosedByCaller = errors.New("closed by Close")

// connError is the terminal error of a connection. Every request that was
// or would be in flight on it fails with this value.
type connError struct {
	addr  string
	cause error
}

func (e *connError) Error() string {
	return fmt.Sprintf("connection to %s closed: %v", e.addr, e.cause)
}

func (e *connError) Unwrap() []error { return []error{ErrConnClosed, e.cause} }

// AuthError reports a failed SASL authentication during Dial. Err is what
// failed: a Kafka error (kerr value, e.g. kerr.SaslAuthenticationFailed)
// with the broker's message, a mechanism error, or a connection error when
// the broker hung up instead of answering.
type AuthError struct {
	Addr      string
	Mechanism string
	Err       error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("sasl authentication to %s failed: %s: %v", e.Addr, e.Mechanism, e.Err)
}

// Unwrap makes errors.Is match both ErrAuthFailed and the cause.
func (e *AuthError) Unwrap() []error { return []error{ErrAuthFailed, e.Err} }
