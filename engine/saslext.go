package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// KeyOAuthTokenEndpoint is where OAUTHBEARER gets its tokens (Kafka's
// OAuthBearerLoginModule with the client credentials grant).
const KeyOAuthTokenEndpoint = "sasl.oauthbearer.token.endpoint.url"

// oauthMechanism is OAUTHBEARER as Kafka's login module does it: a token
// from the endpoint for the JAAS clientId and clientSecret (and scope),
// kept until shortly before it expires. franz-go asks for a token at every
// authentication, re-authentications (KIP-368) included, so a connection
// that outlives a token authenticates again with a fresh one.
func oauthMechanism(cfg map[string]string) (sasl.Mechanism, error) {
	endpoint := cfg[KeyOAuthTokenEndpoint]
	if endpoint == "" {
		return nil, fmt.Errorf("sasl.mechanism OAUTHBEARER needs %s", KeyOAuthTokenEndpoint)
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%s %q is not an http(s) URL", KeyOAuthTokenEndpoint, endpoint)
	}
	jaas := cfg["sasl.jaas.config"]
	ts := &tokenSource{endpoint: endpoint, clientID: jaasField(jaas, "clientId"), secret: jaasField(jaas, "clientSecret"),
		scope: jaasField(jaas, "scope"), client: &http.Client{Timeout: 30 * time.Second}, now: time.Now}
	if ts.clientID == "" || ts.secret == "" {
		return nil, errors.New("sasl.mechanism OAUTHBEARER needs sasl.jaas.config with clientId and clientSecret")
	}
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := ts.token(ctx)
		return oauth.Auth{Token: tok}, err
	}), nil
}

// tokenSource fetches and caches one client's tokens.
type tokenSource struct {
	endpoint, clientID, secret, scope string
	client                            *http.Client
	now                               func() time.Time

	mu      sync.Mutex
	cached  string
	refresh time.Time // when the cached token is to be replaced
}

func (ts *tokenSource) token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.cached != "" && ts.now().Before(ts.refresh) {
		return ts.cached, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if ts.scope != "" {
		form.Set("scope", ts.scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// As Kafka's HttpAccessTokenRetriever: the client's id and secret,
	// form-encoded, as HTTP basic credentials.
	req.SetBasicAuth(url.QueryEscape(ts.clientID), url.QueryEscape(ts.secret))
	resp, err := ts.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("OAUTHBEARER token from %s: %w", ts.endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("OAUTHBEARER token from %s: %w", ts.endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		// The body may echo what was sent: only the status is reported.
		return "", fmt.Errorf("OAUTHBEARER token from %s: %s", ts.endpoint, resp.Status)
	}
	var tr struct {
		AccessToken string  `json:"access_token"`
		ExpiresIn   float64 `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("OAUTHBEARER token from %s: no access_token in the answer", ts.endpoint)
	}
	life := time.Duration(tr.ExpiresIn * float64(time.Second))
	if life <= 0 {
		life = time.Hour // the endpoint did not say; the broker's session lifetime still applies
	}
	ts.cached, ts.refresh = tr.AccessToken, ts.now().Add(life*8/10)
	return ts.cached, nil
}

// awsMechanism is AWS_MSK_IAM with the credentials of the environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), read at
// every authentication so rotated credentials are picked up. Profiles,
// instance metadata and web identity are not read: export the credentials
// they give.
func awsMechanism(lookup func(string) (string, bool)) sasl.Mechanism {
	return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
		key, _ := lookup("AWS_ACCESS_KEY_ID")
		secret, _ := lookup("AWS_SECRET_ACCESS_KEY")
		token, _ := lookup("AWS_SESSION_TOKEN")
		if key == "" || secret == "" {
			return aws.Auth{}, errors.New("AWS_MSK_IAM needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
		}
		return aws.Auth{AccessKey: key, SecretKey: secret, SessionToken: token, UserAgent: "kmirror"}, nil
	})
}
