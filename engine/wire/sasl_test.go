package wire

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func newSASLCluster(t *testing.T) *kfake.Cluster {
	return newCluster(t,
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "alice-secret"),
		kfake.Superuser("SCRAM-SHA-256", "bob", "bob-secret"),
	)
}

// failFast bounds a dial expected to fail well inside the test timeout, so a
// hang shows up as a deadline error instead of a stuck test.
func failFast(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSASL(t *testing.T) {
	for _, tc := range []struct {
		name      string
		good, bad sasl.Mechanism
	}{
		{
			"PLAIN",
			plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
			plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		},
		{
			"SCRAM-SHA-256",
			scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(),
			scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := newSASLCluster(t)
			addr := cluster.ListenAddrs()[0]

			ctx := testCtx(t)
			c := dialTest(t, ctx, addr, Options{SASL: tc.good})
			if _, _, err := metadata(ctx, c, testTopic, 0); err != nil {
				t.Fatalf("metadata after %s auth: %v", tc.name, err)
			}

			bad, err := Dial(failFast(t), addr, Options{SASL: tc.bad})
			if err == nil {
				bad.Close()
				t.Fatal("dial with a wrong password succeeded")
			}
			t.Logf("wrong password: %v", err)
			if !errors.Is(err, ErrAuthFailed) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("wrong password: err = %v, want ErrAuthFailed without a timeout", err)
			}
			if want := "sasl authentication to " + addr + " failed: " + tc.name; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

// TestSASLErrorResponse: a broker that answers SaslAuthenticate with an
// error code (as Kafka does) yields that kerr value and its message.
func TestSASLErrorResponse(t *testing.T) {
	cluster := newSASLCluster(t)
	cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
		return resp, nil, true
	})
	addr := cluster.ListenAddrs()[0]
	_, err := Dial(failFast(t), addr, Options{SASL: plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()})
	t.Logf("rejected: %v", err)
	if !errors.Is(err, ErrAuthFailed) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("err = %v, want ErrAuthFailed and kerr.SaslAuthenticationFailed", err)
	}
	if want := "sasl authentication to " + addr + " failed: PLAIN: SASL_AUTHENTICATION_FAILED"; !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "Invalid username or password") {
		t.Errorf("error %q lacks %q or the broker's message", err, want)
	}
}

// namedMechanism is a mechanism kfake does not offer.
type namedMechanism string

func (m namedMechanism) Name() string { return string(m) }
func (namedMechanism) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return nil, nil, errors.New("not reached")
}

func TestSASLUnsupportedMechanism(t *testing.T) {
	cluster := newSASLCluster(t)
	_, err := Dial(failFast(t), cluster.ListenAddrs()[0], Options{SASL: namedMechanism("GSSAPI")})
	if !errors.Is(err, ErrAuthFailed) || !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("err = %v, want ErrAuthFailed and kerr.UnsupportedSaslMechanism", err)
	}
	if !strings.Contains(err.Error(), "SCRAM-SHA-256") {
		t.Errorf("error %q does not list the broker's mechanisms", err)
	}
}

// TestNoSASLOnSASLCluster: without credentials the broker drops the
// connection at the first real request.
func TestNoSASLOnSASLCluster(t *testing.T) {
	cluster := newSASLCluster(t)
	ctx := failFast(t)
	c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{})
	if _, err := c.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("unauthenticated metadata: err = %v, want ErrConnClosed", err)
	}
}

// TestReauthAfter: a session is renewed 10-15% (at least a second, or
// twice the authentication's latency; at most half the lifetime) before
// its end.
func TestReauthAfter(t *testing.T) {
	for _, tt := range []struct {
		lifetime, latency time.Duration
		lo, hi            time.Duration
	}{
		{2 * time.Second, time.Millisecond, time.Second, time.Second},
		{10 * time.Second, time.Millisecond, 8500 * time.Millisecond, 9 * time.Second},
		{time.Hour, time.Millisecond, 51 * time.Minute, 54 * time.Minute},
		{time.Hour, 10 * time.Minute, 40 * time.Minute, 40 * time.Minute},
		{time.Second, time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
	} {
		for range 50 {
			if got := reauthAfter(tt.lifetime, tt.latency); got < tt.lo || got > tt.hi {
				t.Fatalf("reauthAfter(%s, %s) = %s, want %s..%s", tt.lifetime, tt.latency, got, tt.lo, tt.hi)
			}
		}
	}
}

// TestSASLReauthenticates: against a broker that announces a 1.5 s session
// lifetime (connections.max.reauth.ms), a connection authenticates again
// before each session ends, idle or busy, and serves requests throughout.
func TestSASLReauthenticates(t *testing.T) {
	for _, mech := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(),
	} {
		t.Run(mech.Name(), func(t *testing.T) {
			cluster := newCluster(t,
				kfake.EnableSASL(),
				kfake.Superuser("PLAIN", "alice", "alice-secret"),
				kfake.Superuser("SCRAM-SHA-256", "bob", "bob-secret"),
				kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"}),
			)
			var handshakes atomic.Int32
			cluster.ControlKey(int16(kmsg.SASLHandshake), func(kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				handshakes.Add(1)
				return nil, nil, false
			})
			ctx := testCtx(t)
			c := dialTest(t, ctx, cluster.ListenAddrs()[0], Options{SASL: mech})
			// Idle: the connection's own timer renews the session.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for c.Reauthentications() < 2 {
				select {
				case <-ctx.Done():
					t.Fatalf("idle: %d re-authentications before the deadline", c.Reauthentications())
				case <-tick.C:
				}
			}
			// Busy: requests one after another across two more renewals.
			for n := c.Reauthentications(); c.Reauthentications() < n+2; {
				if _, _, err := metadata(ctx, c, testTopic, 0); err != nil {
					t.Fatalf("metadata after %d re-authentications: %v", c.Reauthentications(), err)
				}
			}
			if got, want := int(handshakes.Load()), 1+c.Reauthentications(); got != want {
				t.Errorf("the broker saw %d handshakes, want %d (one per authentication)", got, want)
			}
			select {
			case <-c.Done():
				t.Fatal("the connection died")
			default:
			}
		})
	}
}
