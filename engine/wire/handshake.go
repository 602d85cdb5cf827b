package wire

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const softwareName = "kmirror"

// softwareVersion is sent in ApiVersions v3+. Brokers reject values outside
// the pattern below with INVALID_REQUEST, so anything else becomes
// "unknown".
var softwareVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && validSoftware.MatchString(bi.Main.Version) {
		return bi.Main.Version
	}
	return "unknown"
}()

var validSoftware = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// negotiateVersions sends ApiVersions at kmsg's highest version and records
// the broker's range per key. A broker that does not know that version
// answers UNSUPPORTED_VERSION; we retry at the ApiVersions version it
// advertises in that answer (KIP-511), or at v0 if it advertises none.
func (c *Conn) negotiateVersions(ctx context.Context) error {
	version := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	for {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		req.ClientSoftwareName = softwareName
		req.ClientSoftwareVersion = softwareVersion
		p, err := c.issue(req)
		if err != nil {
			return err
		}
		raw, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		resp := raw.(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode == kerr.UnsupportedVersion.Code {
			if version == 0 {
				return fmt.Errorf("ApiVersions v0: %w", kerr.UnsupportedVersion)
			}
			next := int16(0)
			for _, k := range resp.ApiKeys {
				if k.ApiKey == apiVersionsKey && k.MaxVersion >= 0 && k.MaxVersion < version {
					next = k.MaxVersion
				}
			}
			version = next
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("ApiVersions v%d: %w", version, err)
		}
		if len(resp.ApiKeys) == 0 {
			return fmt.Errorf("ApiVersions v%d: broker advertised no request keys", version)
		}
		for _, k := range resp.ApiKeys {
			c.versions[k.ApiKey] = versionRange{min: k.MinVersion, max: k.MaxVersion}
		}
		return nil
	}
}

// authenticate runs SaslHandshake v1 and then SaslAuthenticate round trips
// driven by the mechanism's session until both sides are done, and records
// when to authenticate again if the broker announced a session lifetime.
// The caller holds writeMu, so nothing else is written until the exchange
// is over (responses to requests written before it are read first, in
// order, as the broker answers them first).
func (c *Conn) authenticate(ctx context.Context) error {
	mech := c.mech
	failed := func(err error) error {
		return &AuthError{Addr: c.addr, Mechanism: mech.Name(), Err: err}
	}

	if v, ok := c.versions[kmsg.NewPtrSASLHandshakeRequest().Key()]; !ok || v.max < 1 || v.min > 1 {
		return failed(fmt.Errorf("%w: broker does not support SaslHandshake v1", ErrUnsupportedVersion))
	}
	start := time.Now()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	raw, err := c.roundTrip(ctx, hs)
	if err != nil {
		return failed(err)
	}
	// The broker began this exchange at the latest now: the next one must
	// not come within minReauthInterval of that.
	began := time.Now()
	hsResp := raw.(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnsupportedSaslMechanism) {
			return failed(fmt.Errorf("%w (broker enables %v)", err, hsResp.SupportedMechanisms))
		}
		return failed(err)
	}

	session, clientWrite, err := mech.Authenticate(ctx, c.addr)
	if err != nil {
		return failed(err)
	}
	if len(clientWrite) == 0 {
		return failed(errors.New("mechanism produced no first message"))
	}
	var lifetime int64
	// The session may finish with one last message to send (done and a
	// non-empty write), whose response is read but not challenged.
	for done := false; !done || len(clientWrite) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = clientWrite
		v, err := c.pickVersion(req)
		if err != nil {
			return failed(err)
		}
		req.SetVersion(v)
		raw, err := c.roundTrip(ctx, req)
		if err != nil {
			if errors.Is(err, ErrConnClosed) {
				// Brokers may hang up instead of answering with an
				// error code when they reject credentials.
				err = fmt.Errorf("broker closed the connection during authentication: %w", err)
			}
			return failed(err)
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
				err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return failed(err)
		}
		lifetime = resp.SessionLifetimeMillis
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return failed(err)
			}
		}
	}
	c.reauthAt = time.Time{}
	if lifetime > 0 {
		at := start.Add(reauthAfter(time.Duration(min(lifetime, maxLifetimeMs))*time.Millisecond, time.Since(start)))
		// A broker refuses a re-authentication that begins within a
		// second of the last one; one that begins late it accepts.
		if floor := began.Add(minReauthInterval); at.Before(floor) {
			at = floor
		}
		c.reauthAt = at
	}
	return nil
}

// roundTrip writes req (writeMu held) and waits for its answer. It also
// returns when the connection dies: the reader then needs writeMu to fail
// what is still queued.
func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	p, err := c.write(req)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.done:
		return p.resp, p.err
	case <-c.dead:
		return nil, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for %s response: %w", kmsg.NameForKey(req.Key()), context.Cause(ctx))
	}
}

// maxLifetimeMs caps a session lifetime a broker announces (a year), so an
// absurd value cannot overflow the re-authentication time into the past.
const maxLifetimeMs = 365 * 24 * 3600 * 1000

// reauthAfter is how long after the start of an authentication that took
// latency to authenticate again, for a session of lifetime: early enough
// that the requests written before it are answered and the exchange is
// over before the broker's deadline, on which it closes the connection at
// its next request (connections.max.reauth.ms). The margin is 10 to 15% of
// the lifetime (jittered, so connections dialled together do not all
// re-authenticate at once), at least a second or twice the latency, and at
// most half the lifetime.
func reauthAfter(lifetime, latency time.Duration) time.Duration {
	margin := lifetime/10 + rand.N(lifetime/20+1)
	margin = max(margin, time.Second, 2*latency)
	return lifetime - min(margin, lifetime/2)
}

// minReauthInterval keeps re-authentications more than the broker's one
// second apart (KafkaChannel's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS),
// counted from when the broker answered the last handshake: it may have
// begun that one only then, after the requests written before it.
const minReauthInterval = 1200 * time.Millisecond

// reauthenticateIfDue authenticates the connection again once its session
// is due for it; the caller holds writeMu. A failure kills the connection:
// the broker would close it at the session's end anyway.
func (c *Conn) reauthenticateIfDue() error {
	if c.reauthAt.IsZero() || time.Now().Before(c.reauthAt) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.authWait)
	defer cancel()
	if err := c.authenticate(ctx); err != nil {
		c.fail(fmt.Errorf("re-authentication (KIP-368): %w", err))
		return c.err
	}
	c.reauthed++
	return nil
}

// reauthLoop re-authenticates an idle connection when its session is due,
// so the connection lives on however long nothing is sent on it; a busy
// one is re-authenticated by the Issue that finds it due, whichever comes
// first.
func (c *Conn) reauthLoop() {
	for {
		c.writeMu.Lock()
		at := c.reauthAt
		c.writeMu.Unlock()
		if at.IsZero() {
			return
		}
		t := time.NewTimer(time.Until(at))
		select {
		case <-c.dead:
			t.Stop()
			return
		case <-t.C:
		}
		c.writeMu.Lock()
		err := c.reauthenticateIfDue()
		c.writeMu.Unlock()
		if err != nil {
			return
		}
	}
}

// Reauthentications is how many times the connection authenticated again
// because its SASL session was due.
func (c *Conn) Reauthentications() int {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.reauthed
}
