package props

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func parse(t *testing.T, in string) Properties {
	t.Helper()
	p, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatalf("Parse(%q): %v", in, err)
	}
	return p
}

func TestParseSyntax(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Entry
	}{
		{"equals", "a=b", []Entry{{"a", "b", 1}}},
		{"colon", "a:b", []Entry{{"a", "b", 1}}},
		{"space", "a b", []Entry{{"a", "b", 1}}},
		{"spaces around separator", "a \t = \f b", []Entry{{"a", "b", 1}}},
		{"whitespace then separator once", "a  :=b", []Entry{{"a", "=b", 1}}},
		{"leading whitespace", "  \t a=b", []Entry{{"a", "b", 1}}},
		{"trailing whitespace kept", "a=b  ", []Entry{{"a", "b  ", 1}}},
		{"no value", "a", []Entry{{"a", "", 1}}},
		{"no value with separator", "a=", []Entry{{"a", "", 1}}},
		{"hash comment", "# a=b\nc=d", []Entry{{"c", "d", 2}}},
		{"bang comment", "  ! a=b\nc=d", []Entry{{"c", "d", 2}}},
		{"hash inside value", "a=b # c", []Entry{{"a", "b # c", 1}}},
		{"blank lines", "\n   \n\ta=b\n\n", []Entry{{"a", "b", 3}}},
		{"crlf and cr", "a=1\r\nb=2\rc=3", []Entry{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}}},
		{"continuation", "a=one \\\n    two\nb=3", []Entry{{"a", "one two", 1}, {"b", "3", 3}}},
		{"continuation over crlf", "a=x\\\r\n  y", []Entry{{"a", "xy", 1}}},
		{"continuation keeps #", "a=x\\\n#y", []Entry{{"a", "x#y", 1}}},
		{"continuation into blank line ends", "a=x\\\n\nb=y", []Entry{{"a", "x", 1}, {"b", "y", 3}}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", []Entry{{"a", `x\`, 1}, {"b", "y", 2}}},
		{"odd backslashes continue", "a=x\\\\\\\ny", []Entry{{"a", `x\y`, 1}}},
		{"continuation at end of input", "a=x\\", []Entry{{"a", "x", 1}}},
		{"comment does not continue", "# x\\\na=b", []Entry{{"a", "b", 2}}},
		{"lone backslash line continues nothing", "\\\n# c\\\na=b", []Entry{{"a", "b", 3}}},
		{"escapes", `a=\t\n\r\f\\\=\:\#\q`, []Entry{{"a", "\t\n\r\f\\=:#q", 1}}},
		{"escaped separator in key", `a\=b\ c=d`, []Entry{{"a=b c", "d", 1}}},
		{"unicode escape", `a=caf\u00e9 \u20AC`, []Entry{{"a", "café €", 1}}},
		{"surrogate pair", `a=\uD83D\uDE00`, []Entry{{"a", "😀", 1}}},
		{"utf-8 text", "clé=välue", []Entry{{"clé", "välue", 1}}},
		{"escaped non-ascii", `a=\é`, []Entry{{"a", "é", 1}}},
		{"order kept", "z=1\na=2\nm=3", []Entry{{"z", "1", 1}, {"a", "2", 2}, {"m", "3", 3}}},
	}
	for _, tt := range tests {
		if got := parse(t, tt.in).Entries; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Parse(%q) = %+v, want %+v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"duplicate key", "# x\nbootstrap.servers=a:1\nc=d\nd=e\n\n\nbootstrap.servers=b:1",
			`line 7: duplicate key "bootstrap.servers" (first on line 2)`},
		{"duplicate after unescape", "a=1\n\\a=2", `line 2: duplicate key "a" (first on line 1)`},
		{"short unicode escape", "x=1\na=\\u12", `line 2: malformed \uxxxx escape "\\u12"`},
		{"non-hex unicode escape", "a=\\u12g4", `line 1: malformed \uxxxx escape "\\u12g4"`},
		{"unicode escape in key", "\\uxyz0=1", `line 1: malformed \uxxxx escape`},
		{"lone high surrogate", "a=\\uD83Dx", `line 1: unpaired surrogate \uD83D`},
		{"lone low surrogate", "a=\\uDE00", `line 1: unpaired surrogate \uDE00`},
		{"empty key", "\n=value", "line 2: empty key"},
		{"invalid utf-8", "a=b\nc=\xff", "line 2: invalid UTF-8"},
		{"invalid utf-8 on continuation", "a=b\\\n\xff", "line 2: invalid UTF-8"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.in))
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := Parse(iotest.ErrReader(errors.New("disk on fire"))); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("read error = %v", err)
	}
}

func TestGetMapFromMap(t *testing.T) {
	p := parse(t, "b=2\na=1")
	if v, ok := p.Get("a"); !ok || v != "1" {
		t.Errorf("Get(a) = %q, %v", v, ok)
	}
	if _, ok := p.Get("c"); ok {
		t.Error("Get(c) found a missing key")
	}
	m := p.Map()
	if !reflect.DeepEqual(m, map[string]string{"a": "1", "b": "2"}) {
		t.Errorf("Map() = %v", m)
	}
	if got := FromMap(m).Entries; !reflect.DeepEqual(got, []Entry{{"a", "1", 0}, {"b", "2", 0}}) {
		t.Errorf("FromMap = %+v", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"a=b", "a\\\n b", "#c\n!d\na:b c", `\u00e9=\uD83D\uDE00`, "a=\\u12", "a=1\na=2", "\r\n\r=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(strings.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v carries no line", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range p.Entries {
			if e.Key == "" || seen[e.Key] || e.Line < 1 {
				t.Fatalf("bad entry %+v", e)
			}
			seen[e.Key] = true
		}
	})
}
