// Package props reads Java .properties files (the --command-config and
// --mirror-config files operators already keep for Kafka's tools), validates
// mirror configurations, and handles secret values and their ${env:…} /
// ${file:…} references. It does no I/O of its own: readers and lookups are
// passed in.
package props

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Entry is one key/value pair and the line its logical line starts on.
type Entry struct {
	Key   string
	Value string
	Line  int
}

// Properties is a parsed file: entries in file order, each key once.
type Properties struct {
	Entries []Entry
}

// Get returns the value of key.
func (p Properties) Get(key string) (string, bool) {
	for _, e := range p.Entries {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// Map returns the entries as a map.
func (p Properties) Map() map[string]string {
	m := make(map[string]string, len(p.Entries))
	for _, e := range p.Entries {
		m[e.Key] = e.Value
	}
	return m
}

// FromMap builds Properties from a map (for settings read back from
// __mirror_state), in key order and with no line numbers.
func FromMap(m map[string]string) Properties {
	p := Properties{Entries: make([]Entry, 0, len(m))}
	for k, v := range m {
		p.Entries = append(p.Entries, Entry{Key: k, Value: v})
	}
	sort.Slice(p.Entries, func(i, j int) bool { return p.Entries[i].Key < p.Entries[j].Key })
	return p
}

// ParseError is a syntax error at a line of the input.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Parse reads a .properties file with java.util.Properties semantics: '#'
// and '!' comment lines; key=value, key:value or key value; leading
// whitespace dropped; a line ending in an odd number of backslashes continues
// on the next line (whose leading whitespace is dropped too); escapes \t \n
// \r \f \uXXXX, and a backslash before any other character yields that
// character. Like Java, "#" later in a line is not a comment and trailing
// whitespace of a value is kept.
//
// It is stricter than Java where a silent surprise would hurt an operator:
// the input must be UTF-8 (Java reads ISO-8859-1; use \uXXXX for
// portability), a malformed \u escape or an unpaired UTF-16 surrogate is an
// error, an empty key is an error, and a duplicate key is an error instead of
// the last one silently winning.
func Parse(r io.Reader) (Properties, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Properties{}, fmt.Errorf("read properties: %w", err)
	}
	lines := splitLines(string(data))
	var p Properties
	first := map[string]int{}
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		if !utf8.ValidString(lines[i]) {
			return Properties{}, &ParseError{Line: lineNo, Msg: "invalid UTF-8"}
		}
		logical := trimLeft(lines[i])
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) {
			logical = logical[:len(logical)-1]
			if logical == "" || i+1 == len(lines) {
				// A line of just a backslash continues nothing: like Java,
				// the next line starts afresh (and may be a comment). At the
				// end of input Java drops the continuation.
				break
			}
			i++
			if !utf8.ValidString(lines[i]) {
				return Properties{}, &ParseError{Line: i + 1, Msg: "invalid UTF-8"}
			}
			logical += trimLeft(lines[i])
		}
		if logical == "" {
			continue
		}
		rawKey, rawValue := splitKeyValue(logical)
		key, err := unescape(rawKey)
		if err != nil {
			return Properties{}, &ParseError{Line: lineNo, Msg: err.Error()}
		}
		value, err := unescape(rawValue)
		if err != nil {
			return Properties{}, &ParseError{Line: lineNo, Msg: err.Error()}
		}
		if key == "" {
			return Properties{}, &ParseError{Line: lineNo, Msg: "empty key"}
		}
		if at, dup := first[key]; dup {
			return Properties{}, &ParseError{Line: lineNo, Msg: fmt.Sprintf("duplicate key %q (first on line %d)", key, at)}
		}
		first[key] = lineNo
		p.Entries = append(p.Entries, Entry{Key: key, Value: value, Line: lineNo})
	}
	return p, nil
}

// splitLines splits at \n, \r and \r\n, the terminators Java accepts.
func splitLines(s string) []string {
	var lines []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return lines
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeft(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

// continues reports whether s ends in an odd number of backslashes.
func continues(s string) bool {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits a logical line the way Properties.load does: the key
// ends at the first unescaped '=', ':' or whitespace; then whitespace and at
// most one '=' or ':' are skipped.
func splitKeyValue(line string) (key, value string) {
	keyEnd, valueStart, hasSep, escaped := len(line), len(line), false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !escaped && (c == '=' || c == ':' || isSpace(c)) {
			keyEnd, valueStart, hasSep = i, i+1, c == '=' || c == ':'
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isSpace(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	return line[:keyEnd], line[valueStart:]
}

// unescape resolves backslash escapes; \u escapes are UTF-16 code units, so a
// surrogate pair spelled as two escapes makes one character.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		i++
		if i == len(s) {
			break // only after a dropped continuation at end of input
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, n, err := unicodeEscape(s[i-1:])
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
			i += n - 1
			continue
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += n
			continue
		}
		i++
	}
	return b.String(), nil
}

// unicodeEscape decodes the \uXXXX (or surrogate pair \uXXXX\uXXXX) at the
// start of s and returns the rune and the bytes consumed.
func unicodeEscape(s string) (rune, int, error) {
	hi, err := hex4(s)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case hi >= 0xDC00 && hi <= 0xDFFF:
		return 0, 0, fmt.Errorf(`unpaired surrogate %s`, s[:6])
	case hi < 0xD800 || hi > 0xDBFF:
		return hi, 6, nil
	}
	lo, err := hex4(s[6:])
	if err != nil || lo < 0xDC00 || lo > 0xDFFF {
		return 0, 0, fmt.Errorf(`unpaired surrogate %s`, s[:6])
	}
	return 0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00), 12, nil
}

// hex4 parses the \uXXXX at the start of s.
func hex4(s string) (rune, error) {
	if len(s) < 2 || s[0] != '\\' || s[1] != 'u' {
		return 0, fmt.Errorf(`malformed \uxxxx escape %q`, prefix(s, 6))
	}
	if len(s) < 6 {
		return 0, fmt.Errorf(`malformed \uxxxx escape %q`, s)
	}
	var r rune
	for _, c := range []byte(s[2:6]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf(`malformed \uxxxx escape %q`, prefix(s, 6))
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

func prefix(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
