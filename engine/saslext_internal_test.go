package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestOAuthBearerClientCredentials(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != "kmirror" || secret != "s3cret" ||
			r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "kafka" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		n := calls.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "token-" + string(rune('0'+n)), "expires_in": 100})
	}))
	defer srv.Close()
	cfg := map[string]string{
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "oauthbearer", KeyOAuthTokenEndpoint: srv.URL,
		"sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="kmirror" clientSecret = "s3cret" scope="kafka";`,
	}
	_, mech, err := SecurityParts(cfg)
	if err != nil || mech == nil || mech.Name() != "OAUTHBEARER" {
		t.Fatalf("mechanism %v, %v", mech, err)
	}
	ctx := context.Background()
	for range 2 { // the second authentication reuses the token
		_, first, err := mech.Authenticate(ctx, "broker:9092")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(first), "auth=Bearer token-1\x01") {
			t.Fatalf("client first message %q", first)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d token requests for two authentications within the token's life", calls.Load())
	}

	// Near its expiry the token is replaced: a re-authentication gets a new one.
	clock := time.Now()
	ts := &tokenSource{endpoint: srv.URL, clientID: "kmirror", secret: "s3cret", scope: "kafka", client: srv.Client(), now: func() time.Time { return clock }}
	a, err := ts.token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(81 * time.Second)
	b, err := ts.token(ctx)
	if err != nil || a == b {
		t.Fatalf("after 81 s of a 100 s token: %q then %q, %v", a, b, err)
	}

	ts.secret = "wrong"
	ts.cached = ""
	if _, err := ts.token(ctx); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("refused credentials: %v", err)
	}
	for _, bad := range []map[string]string{
		{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": cfg["sasl.jaas.config"]},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", KeyOAuthTokenEndpoint: srv.URL},
		{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", KeyOAuthTokenEndpoint: "ftp://x", "sasl.jaas.config": cfg["sasl.jaas.config"]},
	} {
		if _, _, err := SecurityParts(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestAWSMSKIAMFromEnvironment(t *testing.T) {
	env := map[string]string{}
	mech := awsMechanism(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if mech.Name() != "AWS_MSK_IAM" {
		t.Fatal(mech.Name())
	}
	if _, _, err := mech.Authenticate(context.Background(), "b-1.example:9098"); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("no credentials: %v", err)
	}
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "AKIDEXAMPLE", "secret"
	_, first, err := mech.Authenticate(context.Background(), "b-1.mirror.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil || !strings.Contains(string(first), "AKIDEXAMPLE") || strings.Contains(string(first), `"secret"`) {
		t.Fatalf("signed request %s, %v", first, err)
	}
}
