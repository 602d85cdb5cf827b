package props

import (
	"slices"
	"strings"
	"testing"
)

func TestKIPSpellings(t *testing.T) {
	p := parse(t, `bootstrap.servers=a:1
mirror.num.replica.fetchers=3
topic.properties.exclude=retention.ms
groups.include=app-.*
groups.exclude=app-test
acls.include=TOPIC;orders-.*,GROUP;app-.*
topics.include=payments,orders-.*
topics.exclude=__.*,orders-test
fetch.max.bytes=2048
fetch.wait.max.ms=250
fetch.min.bytes=1024
fetch.response.max.bytes=1048576
mirror.failed.retry.max.attempts=0
security.protocol=sasl_ssl
sasl.mechanism=scram-sha-512
sasl.jaas.config=x
mirror.gap.policy=FILL
mirror.destination.write.guard=ACL
`)
	warnings, err := ValidateMirrorConfig(p)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("warnings %q, err %v", warnings, err)
	}
	s, err := ParseMirrorSettings(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.NumFetchers != 3 || !slices.Equal(s.TopicPropertiesExclude, []string{"retention.ms"}) ||
		!slices.Equal(s.GroupsInclude, []string{"app-.*"}) || !slices.Equal(s.GroupsExclude, []string{"app-test"}) ||
		!slices.Equal(s.ACLInclude, []string{"TOPIC;orders-.*", "GROUP;app-.*"}) ||
		!slices.Equal(s.TopicsInclude, []string{"payments", "orders-.*"}) || !slices.Equal(s.TopicsExclude, []string{"__.*", "orders-test"}) || s.FetchMaxBytes != 2048 ||
		s.FetchWaitMax.Milliseconds() != 250 || s.FetchMinBytes != 1024 || s.FetchResponseMaxBytes != 1<<20 || s.RetryMaxAttempts != 0 || s.GapPolicy != "fill" || s.WriteGuard != WriteGuardACL {
		t.Fatalf("settings %+v", s)
	}
}

func TestOldSpellingsWarnOnce(t *testing.T) {
	p := parse(t, "bootstrap.servers=a:1\nmirror.num.fetchers=2\nmirror.acl.include=*\nmirror.topics.include=x\nmirror.fetch.max.bytes=4096\n")
	warnings, err := ValidateMirrorConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"line 2: mirror.num.fetchers is the old name of mirror.num.replica.fetchers (KIP-1279): it still works",
		"line 3: mirror.acl.include is the old name of acls.include (KIP-1279): it still works",
		"line 4: mirror.topics.include is the old name of topics.include (KIP-1279): it still works",
		"line 5: mirror.fetch.max.bytes is the old name of fetch.max.bytes (KIP-1279): it still works",
	}
	if !slices.Equal(warnings, want) {
		t.Fatalf("warnings %q", warnings)
	}
	if s, _ := ParseMirrorSettings(p); s.NumFetchers != 2 || !slices.Equal(s.ACLInclude, []string{"*"}) ||
		!slices.Equal(s.TopicsInclude, []string{"x"}) || s.FetchMaxBytes != 4096 {
		t.Fatalf("settings %+v", s)
	}
	_, err = ValidateMirrorConfig(parse(t, "bootstrap.servers=a:1\nmirror.num.fetchers=2\nmirror.num.replica.fetchers=3\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3: mirror.num.replica.fetchers: set twice: also mirror.num.fetchers on line 2") {
		t.Fatalf("both spellings: %v", err)
	}
}

func TestSuggestions(t *testing.T) {
	tests := []struct{ key, want string }{
		{"mirror.topics.includ", `did you mean "topics.include"`},
		{"mirror.topic.exclude", `did you mean "topics.exclude"`},
		{"topics.includ", `did you mean "topics.include"`},
		{"fetch.wait.max", `did you mean "fetch.wait.max.ms"`},
		{"groups.exclud", `did you mean "groups.exclude"`},
		{"mirror.num.fetcher", `did you mean "mirror.num.replica.fetchers"`},
		{"sasl.mechanisms", `did you mean "sasl.mechanism"`},
		{"completely.else", "(ignored)"},
	}
	for _, tt := range tests {
		w, _ := ValidateMirrorConfig(parse(t, "bootstrap.servers=a:1\n"+tt.key+"=x\n"))
		if len(w) != 1 || !strings.Contains(w[0], tt.want) {
			t.Errorf("%s: %q, want %q", tt.key, w, tt.want)
		}
	}
	w, _ := ValidateClientConfig(parse(t, "security.protocol=SSL\nsasl.mechanisms=PLAIN\n"))
	if len(w) != 1 || !strings.Contains(w[0], `line 2: unknown setting "sasl.mechanisms" (did you mean "sasl.mechanism"?)`) {
		t.Errorf("client config: %q", w)
	}
	if _, err := ValidateClientConfig(parse(t, "security.protocol=TLS\n")); err == nil {
		t.Error("client config: bad protocol accepted")
	}
}

func TestACLRules(t *testing.T) {
	for _, ok := range []string{"*", "TOPIC;orders-.*,GROUP;app-.*", "topic;*", ".*", "TOPIC;x;READ;ALLOW;User:a"} {
		if err := aclRules(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"TABLE;x", "TOPIC;(", "a;b;c"} {
		if err := aclRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStoreTypes(t *testing.T) {
	for _, in := range []string{
		"ssl.keystore.type=pem\nssl.truststore.type=PEM\n",
		"ssl.keystore.type=PKCS12\nssl.truststore.type=pkcs12\n",
		"ssl.keystore.type=JKS\nssl.truststore.type=jks\n",
	} {
		if _, err := ValidateClientConfig(parse(t, in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	_, err := ValidateMirrorConfig(parse(t, "bootstrap.servers=a:1\nssl.keystore.type=JCEKS\n"))
	if err == nil || !strings.Contains(err.Error(), `line 2: ssl.keystore.type: "JCEKS" is not one of PEM, PKCS12, JKS`) {
		t.Fatalf("JCEKS: %v", err)
	}
}

func TestSASLMechanisms(t *testing.T) {
	ok := []string{
		"security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nsasl.oauthbearer.token.endpoint.url=https://idp/token\nsasl.jaas.config=x clientId=a clientSecret=${env:S};\n",
		"security.protocol=SASL_SSL\nsasl.mechanism=aws_msk_iam\n",
	}
	for _, in := range ok {
		if _, err := ValidateClientConfig(parse(t, in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	_, err := ValidateClientConfig(parse(t, "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: sasl.mechanism: OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url") {
		t.Errorf("OAUTHBEARER without an endpoint: %v", err)
	}
}

// TestACLIncludeDefault: ACL sync copies every ACL unless acls.include
// says otherwise (KIP-1279's default "*"); an empty acls.include turns it
// off.
func TestACLIncludeDefault(t *testing.T) {
	for in, want := range map[string][]string{
		"bootstrap.servers=a:1\n":                         {"*"},
		"bootstrap.servers=a:1\nacls.include=\n":          nil,
		"bootstrap.servers=a:1\nacls.include=TOPIC;x.*\n": {"TOPIC;x.*"},
	} {
		s, err := ParseMirrorSettings(parse(t, in))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.ACLInclude, want) || (want == nil && len(s.ACLInclude) != 0) {
			t.Errorf("%q: ACLInclude %q, want %q", in, s.ACLInclude, want)
		}
	}
}
