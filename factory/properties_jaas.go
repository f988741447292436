package factory

import (
	"fmt"
	"strings"
)

// The login modules of the Java client that sasl.jaas.config may name.
const (
	plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// otherLoginModules are modules Kafka users name that have no franz-go
// counterpart here; errors name them, since they are not the user's text.
var otherLoginModules = map[string]string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAuthBearerLoginModule (OAUTHBEARER)",
	"com.sun.security.auth.module.Krb5LoginModule":                        "Krb5LoginModule (GSSAPI)",
}

// jaasLogin is what a sasl.jaas.config for PLAIN or SCRAM says.
type jaasLogin struct {
	module string // "PLAIN" or "SCRAM": the mechanisms the module serves
	user   string
	pass   secret
	token  bool // ScramLoginModule tokenauth=true: a delegation token
}

// jaasError is a sasl.jaas.config error. It never quotes the value, which
// holds a password: it names only what the parser expected and where.
type jaasError struct{ msg string }

func (e *jaasError) Error() string { return "sasl.jaas.config: " + e.msg }

func jaasErr(format string, args ...any) error {
	return &jaasError{fmt.Sprintf(format, args...)}
}

// parseJAAS reads a sasl.jaas.config value as Kafka's JaasConfig does:
//
//	<login module class> <control flag> [<option>=<value> ...];
//
// with exactly one entry; values are words or strings in double or single
// quotes with Java's backslash escapes; // and /* */ are comments.
// Unlike Java, it refuses unknown or repeated options and unterminated
// strings, which Java would ignore or cut at the end of the line.
func parseJAAS(s string) (jaasLogin, error) {
	lx := jaasLexer{s: s}
	var l jaasLogin
	t, err := lx.next()
	if err != nil {
		return l, err
	}
	if t.kind != tokWord {
		return l, jaasErr("expected a login module class name at byte %d", t.pos)
	}
	switch t.text {
	case plainLoginModule:
		l.module = "PLAIN"
	case scramLoginModule:
		l.module = "SCRAM"
	default:
		if name, ok := otherLoginModules[t.text]; ok {
			return l, jaasErr("%s is not supported; use %s or %s", name, plainLoginModule, scramLoginModule)
		}
		return l, jaasErr("the login module is not %s or %s", plainLoginModule, scramLoginModule)
	}
	if t, err = lx.next(); err != nil {
		return l, err
	}
	switch strings.ToLower(t.text) {
	case "required", "requisite", "sufficient", "optional":
		if t.kind == tokWord {
			break
		}
		fallthrough
	default:
		return l, jaasErr("expected a control flag (required, requisite, sufficient or optional) at byte %d", t.pos)
	}
	seen := map[string]bool{}
	for {
		key, err := lx.next()
		if err != nil {
			return l, err
		}
		if key.kind == tokSemi {
			break
		}
		if key.kind != tokWord && key.kind != tokQuoted {
			return l, jaasErr("expected an option or ';' at byte %d", key.pos)
		}
		var known bool
		switch key.text {
		case "username", "password":
			known = true
		case "tokenauth":
			known = l.module == "SCRAM"
		}
		if !known {
			// Not quoted: a garbled entry can put a password here.
			opts := "username and password"
			if l.module == "SCRAM" {
				opts = "username, password and tokenauth"
			}
			return l, jaasErr("unknown option at byte %d (%s takes %s)", key.pos, moduleName(l.module), opts)
		}
		if seen[key.text] {
			return l, jaasErr("option %s given twice", key.text)
		}
		seen[key.text] = true
		if eq, err := lx.next(); err != nil {
			return l, err
		} else if eq.kind != tokEq {
			return l, jaasErr("expected '=' after %s at byte %d", key.text, eq.pos)
		}
		val, err := lx.next()
		if err != nil {
			return l, err
		}
		if val.kind != tokWord && val.kind != tokQuoted {
			return l, jaasErr("expected a value for %s at byte %d", key.text, val.pos)
		}
		switch key.text {
		case "username":
			l.user = val.text
		case "password":
			l.pass = secret(val.text)
		case "tokenauth":
			switch strings.ToLower(val.text) {
			case "true":
				l.token = true
			case "false":
			default:
				return l, jaasErr("tokenauth is not true or false")
			}
		}
	}
	if t, err := lx.next(); err != nil {
		return l, err
	} else if t.kind != tokEOF {
		return l, jaasErr("more than one login module (byte %d): Kafka takes exactly one", t.pos)
	}
	switch {
	case !seen["username"]:
		return l, jaasErr("no username option")
	case !seen["password"]:
		return l, jaasErr("no password option")
	case l.user == "":
		return l, jaasErr("username is empty")
	}
	return l, nil
}

// moduleName is the class name of the module serving mechanism family m.
func moduleName(m string) string {
	if m == "SCRAM" {
		return "ScramLoginModule"
	}
	return "PlainLoginModule"
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokEq
	tokSemi
	tokOther
)

type jaasToken struct {
	kind tokKind
	text string
	pos  int
}

// jaasLexer splits a JAAS entry into tokens the way java.io.StreamTokenizer
// does with Kafka's settings, closely enough for the entries Kafka accepts.
type jaasLexer struct {
	s string
	i int
}

func isJAASWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == '$' || c >= 0x80
}

func (lx *jaasLexer) next() (jaasToken, error) {
	if err := lx.skip(); err != nil {
		return jaasToken{}, err
	}
	start := lx.i
	if lx.i == len(lx.s) {
		return jaasToken{kind: tokEOF, pos: start}, nil
	}
	switch c := lx.s[lx.i]; {
	case c == '=':
		lx.i++
		return jaasToken{kind: tokEq, pos: start}, nil
	case c == ';':
		lx.i++
		return jaasToken{kind: tokSemi, pos: start}, nil
	case c == '"' || c == '\'':
		text, err := lx.quoted(c)
		return jaasToken{kind: tokQuoted, text: text, pos: start}, err
	case isJAASWordByte(c):
		for lx.i < len(lx.s) && isJAASWordByte(lx.s[lx.i]) {
			lx.i++
		}
		return jaasToken{kind: tokWord, text: lx.s[start:lx.i], pos: start}, nil
	default:
		lx.i++
		return jaasToken{kind: tokOther, pos: start}, nil
	}
}

// skip passes white space and comments.
func (lx *jaasLexer) skip() error {
	for lx.i < len(lx.s) {
		switch c := lx.s[lx.i]; {
		case c <= ' ':
			lx.i++
		case strings.HasPrefix(lx.s[lx.i:], "//"):
			end := strings.IndexAny(lx.s[lx.i:], "\r\n")
			if end < 0 {
				lx.i = len(lx.s)
			} else {
				lx.i += end
			}
		case strings.HasPrefix(lx.s[lx.i:], "/*"):
			end := strings.Index(lx.s[lx.i+2:], "*/")
			if end < 0 {
				return jaasErr("comment at byte %d is not closed", lx.i)
			}
			lx.i += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

// quoted reads a string that starts with quote at lx.i, with Java's escapes:
// \b \f \n \r \t \a \v, octal \0 to \377, and \ before any other character
// standing for that character.
func (lx *jaasLexer) quoted(quote byte) (string, error) {
	start := lx.i
	lx.i++
	var b strings.Builder
	for lx.i < len(lx.s) {
		c := lx.s[lx.i]
		switch {
		case c == quote:
			lx.i++
			return b.String(), nil
		case c == '\n' || c == '\r':
			return "", jaasErr("string at byte %d ends at a line break, without its closing quote", start)
		case c == '\\' && lx.i+1 < len(lx.s):
			lx.i++
			e := lx.s[lx.i]
			lx.i++
			switch e {
			case 'a':
				b.WriteByte(7)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '0', '1', '2', '3', '4', '5', '6', '7':
				n := int(e - '0')
				// Up to three digits, and three only from \0 to \3, as
				// in StreamTokenizer: the value stays below 256.
				maxDigits := 2
				if e <= '3' {
					maxDigits = 3
				}
				for d := 1; d < maxDigits && lx.i < len(lx.s) && lx.s[lx.i] >= '0' && lx.s[lx.i] <= '7'; d++ {
					n = n*8 + int(lx.s[lx.i]-'0')
					lx.i++
				}
				b.WriteRune(rune(n))
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			lx.i++
		}
	}
	return "", jaasErr("string at byte %d has no closing quote", start)
}
