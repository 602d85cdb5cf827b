package engine

import "testing"

func TestJAASFieldSpacesAndWords(t *testing.T) {
	for _, c := range []struct{ in, u, p string }{
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr;et";`, "alice", "s3cr;et"},
		{`PlainLoginModule required username = "bob"  password =  "p\"w";`, "bob", `p"w`},
		{`PlainLoginModule required xusername="no" username=carol password=pw;`, "carol", "pw"},
	} {
		if u, p := jaasField(c.in, "username"), jaasField(c.in, "password"); u != c.u || p != c.p {
			t.Errorf("%s: %q %q", c.in, u, p)
		}
	}
}
