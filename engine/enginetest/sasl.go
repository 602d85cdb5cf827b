package enginetest

import (
	"errors"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/linkproxy"
)

// SASLSessions stands between a kfake cluster's listeners and its clients
// and ends SASL sessions the way a Kafka broker with
// connections.max.reauth.ms does (KIP-368). kfake announces that lifetime
// (kfake.BrokerConfigs with connections.max.reauth.ms) in its
// SaslAuthenticate answers and accepts a re-authentication, but it never
// ends a session. Through SASLSessions a connection whose session expired
// is closed when the broker would start on its next request, unless that
// request begins a re-authentication (a SaslHandshake), which Kafka's
// SocketServer accepts late too but not within a second of the previous
// one. Pass Listen to the cluster with kfake.ListenFn.
//
// Like a broker, it hands the cluster a connection's next request only
// once the previous one is answered, so the session is checked when work
// on the request would start, not when its bytes arrived. Produce requests
// with acks=0, which have no answer, are not supported.
type SASLSessions struct {
	mu      sync.Mutex
	reauths map[SASLClient]int
	expired map[SASLClient]int // connections closed at the end of their session
	tooSoon map[SASLClient]int // connections closed for a re-authentication within a second of the last
}

// SASLClient tells clients apart: by the client id of their requests and
// the software name of their ApiVersions request (KIP-511: "kgo" for
// franz-go clients, "kmirror" for kmirror's own connections).
type SASLClient struct {
	ID, Software string
}

// NewSASLSessions returns sessions with nothing counted yet.
func NewSASLSessions() *SASLSessions {
	return &SASLSessions{reauths: map[SASLClient]int{}, expired: map[SASLClient]int{}, tooSoon: map[SASLClient]int{}}
}

// Listen opens a TCP listener whose connections' sessions are enforced.
func (s *SASLSessions) Listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &saslListener{Listener: l, s: s}, nil
}

// Reauthentications counts, by client, the SaslHandshake requests sent on
// connections that had authenticated already.
func (s *SASLSessions) Reauthentications() map[SASLClient]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.reauths)
}

// Expired counts, by client, the connections closed because their session
// ended before their next request.
func (s *SASLSessions) Expired() map[SASLClient]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.expired)
}

// TooSoon counts, by client, the connections closed because they began a
// re-authentication within a second of the previous one.
func (s *SASLSessions) TooSoon() map[SASLClient]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.tooSoon)
}

type saslListener struct {
	net.Listener
	s *SASLSessions
}

func (l *saslListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &saslConn{Conn: c, s: l.s}
	sc.cond = sync.NewCond(&sc.mu)
	return sc, nil
}

var (
	errSessionExpired = errors.New("SASL session expired: connection closed by the test's broker (connections.max.reauth.ms)")
	errReauthTooSoon  = errors.New("SASL re-authentication within a second of the last one: refused by the test's broker")
)

// saslConn is the cluster's side of one client connection. kfake reads
// requests from one goroutine (Read) and writes answers from another
// (Write).
type saslConn struct {
	net.Conn
	s *SASLSessions

	in       []byte // request bytes read from the client, not yet handed over
	ahead    []byte // the rest of the request being handed to the cluster
	software string // ClientSoftwareName of the connection's ApiVersions

	mu         sync.Mutex
	cond       *sync.Cond // signalled when an answer is written or the connection closes
	waiting    bool       // a request is handed over and not answered yet
	key        int16      // that request's key and version
	version    int16
	authed     bool      // the connection completed a SASL authentication with a lifetime
	expiry     time.Time // end of the session; zero: the broker announced no lifetime
	reauthing  bool      // a re-authentication's handshake was handed over, its last answer not yet written
	lastReauth time.Time // when the last re-authentication began
	closed     bool
	response   []byte // answer bytes written by the cluster, short of a whole answer
}

// kill closes the connection for cause, counted for who in counts; c.mu
// is held and released.
func (c *saslConn) kill(counts map[SASLClient]int, who SASLClient, cause error) error {
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.s.mu.Lock()
	counts[who]++
	c.s.mu.Unlock()
	_ = c.Conn.Close()
	return cause
}

func (c *saslConn) Read(p []byte) (int, error) {
	if len(c.ahead) > 0 {
		n := copy(p, c.ahead)
		c.ahead = c.ahead[n:]
		return n, nil
	}
	frame, err := c.nextRequest()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	for c.waiting && !c.closed {
		c.cond.Wait()
	}
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	r := kbin.Reader{Src: frame[4:]}
	key, version := r.Int16(), r.Int16()
	r.Int32() // correlation id
	who := SASLClient{Software: c.software}
	if id := r.NullableString(); id != nil {
		who.ID = *id
	}
	if key == int16(kmsg.ApiVersions) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		if r.Complete() == nil && req.ReadFrom(r.Src) == nil {
			c.software = req.ClientSoftwareName
		}
	}
	now := time.Now()
	switch {
	case key == int16(kmsg.SASLHandshake) && c.authed:
		// A re-authentication begins; Kafka lets it begin after the
		// session ended too, but not within a second of the last one
		// (KafkaChannel.maybeBeginServerReauthentication): its
		// handshake then fails, and so does the client's exchange.
		if !c.lastReauth.IsZero() && now.Sub(c.lastReauth) < time.Second {
			return 0, c.kill(c.s.tooSoon, who, errReauthTooSoon)
		}
		c.lastReauth, c.reauthing = now, true
		c.s.mu.Lock()
		c.s.reauths[who]++
		c.s.mu.Unlock()
	case key == int16(kmsg.SASLAuthenticate) && c.reauthing:
		// The broker's authenticator reads the exchange: no session check.
	case !c.expiry.IsZero() && now.After(c.expiry):
		return 0, c.kill(c.s.expired, who, errSessionExpired)
	}
	c.waiting, c.key, c.version = true, key, version
	c.mu.Unlock()
	n := copy(p, frame)
	c.ahead = frame[n:]
	return n, nil
}

// nextRequest reads from the client until a whole request is buffered and
// returns it.
func (c *saslConn) nextRequest() ([]byte, error) {
	buf := make([]byte, 32<<10)
	for {
		if frame, rest, ok := linkproxy.NextFrame(c.in); ok {
			out := append([]byte(nil), frame...)
			c.in = append(c.in[:0], rest...)
			return out, nil
		}
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

func (c *saslConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.response = append(c.response, p...)
	for {
		frame, rest, ok := linkproxy.NextFrame(c.response)
		if !ok {
			break
		}
		if c.waiting && kmsg.Key(c.key) == kmsg.SASLAuthenticate {
			c.noteAuthenticate(frame)
		}
		c.response = append(c.response[:0], rest...)
		c.waiting = false
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// noteAuthenticate starts the session a successful SaslAuthenticate answer
// announces a lifetime for; c.mu is held.
func (c *saslConn) noteAuthenticate(frame []byte) {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(c.version)
	r := kbin.Reader{Src: frame[8:]} // size, correlation id
	if resp.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil || resp.ReadFrom(r.Src) != nil || resp.ErrorCode != 0 {
		c.reauthing = false
		return
	}
	if resp.SessionLifetimeMillis > 0 { // the last answer of the exchange
		c.authed, c.reauthing = true, false
		c.expiry = time.Now().Add(time.Duration(resp.SessionLifetimeMillis) * time.Millisecond)
	}
}

func (c *saslConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	return c.Conn.Close()
}
