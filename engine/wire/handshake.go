package wire

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
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
// driven by the mechanism's session until both sides are done.
func (c *Conn) authenticate(ctx context.Context, mech sasl.Mechanism) error {
	failed := func(err error) error {
		return &AuthError{Addr: c.addr, Mechanism: mech.Name(), Err: err}
	}

	if v, ok := c.versions[kmsg.NewPtrSASLHandshakeRequest().Key()]; !ok || v.max < 1 || v.min > 1 {
		return failed(fmt.Errorf("%w: broker does not support SaslHandshake v1", ErrUnsupportedVersion))
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech.Name()
	p, err := c.issue(hs)
	if err != nil {
		return failed(err)
	}
	raw, err := p.Wait(ctx)
	if err != nil {
		return failed(err)
	}
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
	// The session may finish with one last message to send (done and a
	// non-empty write), whose response is read but not challenged.
	for done := false; !done || len(clientWrite) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = clientWrite
		raw, err := c.Request(ctx, req)
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
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return failed(err)
			}
		}
	}
	return nil
}
