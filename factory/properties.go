package factory

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kconsist/kconsist/rebootstrap"
)

// property describes one client configuration key.
type property struct {
	accepted string // what the key accepts, for error messages
	parse    func(v string) (Opt, error)
	// secret: errors must not show the value.
	secret bool
}

// Where a key comes from, as README's configuration table says: the Java
// client, librdkafka, both, or kconsist itself. Keys not listed here are
// both clients'.
var keyOrigins = map[string]string{
	"consistency.mode":              "kconsist",
	"metadata.cluster.check.enable": "Java",
	"sasl.jaas.config":              "Java",
	"ssl.keystore.location":         "Java",
	"ssl.keystore.type":             "Java",
	"ssl.truststore.location":       "Java",
	"ssl.truststore.type":           "Java",
	"sasl.username":                 "librdkafka",
	"sasl.password":                 "librdkafka",
	"ssl.ca.location":               "librdkafka",
	"ssl.certificate.location":      "librdkafka",
	"ssl.key.location":              "librdkafka",
}

// keyOrigin returns where key comes from; see keyOrigins.
func keyOrigin(key string) string {
	if o, ok := keyOrigins[key]; ok {
		return o
	}
	return "both"
}

// maxMs is the largest number of milliseconds a time.Duration holds.
const maxMs = int64(math.MaxInt64 / time.Millisecond)

func msProperty[O Opt](key string, min int64, build func(time.Duration) O) property {
	return property{
		accepted: fmt.Sprintf("an integer number of milliseconds >= %d", min),
		parse: func(v string) (Opt, error) {
			t := strings.TrimSpace(v)
			n, err := strconv.ParseInt(t, 10, 64)
			switch {
			case err == nil && n > maxMs, errors.Is(err, strconv.ErrRange) && t[0] != '-':
				return nil, fmt.Errorf("%s: %q is more than the maximum, %d (about 292 years)", key, v, maxMs)
			case err != nil || n < min:
				return nil, fmt.Errorf("%s: %q is not an integer number of milliseconds >= %d", key, v, min)
			}
			return build(time.Duration(n) * time.Millisecond), nil
		},
	}
}

func enumProperty(key string, values []string, build func(i int) Opt) property {
	return property{
		accepted: "one of " + strings.Join(values, ", "),
		parse: func(v string) (Opt, error) {
			for i, ok := range values {
				if strings.EqualFold(strings.TrimSpace(v), ok) {
					return build(i), nil
				}
			}
			return nil, fmt.Errorf("%s: %q is not one of %s", key, v, strings.Join(values, ", "))
		},
	}
}

func stringProperty[O Opt](key string, build func(string) O) property {
	return property{accepted: "a non-empty string", parse: func(v string) (Opt, error) {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%s: empty value", key)
		}
		return build(strings.TrimSpace(v)), nil
	}}
}

func boolProperty[O Opt](key string, build func(bool) O) property {
	return property{accepted: "true or false", parse: func(v string) (Opt, error) {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return build(true), nil
		case "false":
			return build(false), nil
		}
		return nil, fmt.Errorf("%s: %q is not true or false", key, v)
	}}
}

var properties = map[string]property{
	"bootstrap.servers": {accepted: "a comma-separated list of host:port", parse: func(v string) (Opt, error) {
		var seeds []string
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			i := strings.LastIndexByte(s, ':')
			if i <= 0 || i == len(s)-1 {
				return nil, fmt.Errorf("bootstrap.servers: %q is not host:port", s)
			}
			if p, err := strconv.ParseUint(s[i+1:], 10, 16); err != nil || p == 0 {
				return nil, fmt.Errorf("bootstrap.servers: %q has no valid port", s)
			}
			seeds = append(seeds, s)
		}
		if len(seeds) == 0 {
			return nil, fmt.Errorf("bootstrap.servers: no host:port in %q", v)
		}
		return BootstrapServers(seeds...), nil
	}},
	"consistency.mode": enumProperty("consistency.mode", []string{"auto", "native", "emulated", "off"}, func(i int) Opt {
		return Consistency(ConsistencyMode(i))
	}),
	"client.id": stringProperty("client.id", ClientID),
	"metadata.recovery.strategy": enumProperty("metadata.recovery.strategy", []string{"rebootstrap", "none"}, func(i int) Opt {
		return RecoveryStrategy([]rebootstrap.Strategy{rebootstrap.Rebootstrap, rebootstrap.None}[i])
	}),
	"metadata.cluster.check.enable": boolProperty("metadata.cluster.check.enable", ClusterCheck),
	"request.timeout.ms":            msProperty("request.timeout.ms", 1, RequestTimeout),
	"retry.backoff.ms":              msProperty("retry.backoff.ms", 0, RetryBackoff),
	"acks": enumProperty("acks", []string{"all", "-1", "1", "0"}, func(i int) Opt {
		return RequiredAcks([]Acks{AllISRAcks, AllISRAcks, LeaderAck, NoAck}[i])
	}),
	"enable.idempotence":  boolProperty("enable.idempotence", Idempotence),
	"linger.ms":           msProperty("linger.ms", 0, Linger),
	"delivery.timeout.ms": msProperty("delivery.timeout.ms", 1, DeliveryTimeout),
	"compression.type": enumProperty("compression.type", codecNames[:], func(i int) Opt {
		return Compression(Codec(i))
	}),
	"group.id":               stringProperty("group.id", GroupID),
	"transactional.id":       stringProperty("transactional.id", TransactionalID),
	"transaction.timeout.ms": msProperty("transaction.timeout.ms", 1, TransactionTimeout),
	"auto.offset.reset": enumProperty("auto.offset.reset", []string{"earliest", "latest", "none"}, func(i int) Opt {
		return AutoOffsetReset([]OffsetReset{ResetEarliest, ResetLatest, ResetNone}[i])
	}),
	"isolation.level": enumProperty("isolation.level", isolationNames[:], func(i int) Opt {
		return IsolationLevel(Isolation(i))
	}),
	"security.protocol": enumProperty("security.protocol", protocolNames[1:], func(i int) Opt {
		return SecurityProtocol(Protocol(i + 1))
	}),
	// The mechanism, user and password are set one by one: the protocol
	// comes from security.protocol, which FromProperties requires with
	// any sasl.* key.
	"sasl.mechanism": enumProperty("sasl.mechanism", mechanismNames[1:], func(i int) Opt {
		return security(func(c *config) { c.security.sasl.mechanism = Mechanism(i + 1) })
	}),
	"sasl.username": stringProperty("sasl.username", func(s string) Opt {
		return security(func(c *config) { c.security.sasl.user = s })
	}),
	"sasl.password": {accepted: "a string", secret: true, parse: func(v string) (Opt, error) {
		return security(func(c *config) { c.security.sasl.pass = secret(v) }), nil
	}},
	"sasl.jaas.config": {accepted: "one " + plainLoginModule + " or " + scramLoginModule + " entry with username and password", secret: true, parse: func(v string) (Opt, error) {
		l, err := parseJAAS(v)
		if err != nil {
			return nil, err
		}
		return security(func(c *config) {
			sa := &c.security.sasl
			sa.user, sa.pass, sa.module, sa.token = l.user, l.pass, l.module, l.token
		}), nil
	}},
	// librdkafka's names and the Java client's share fields, so that a
	// client's properties replace the factory's whichever names each uses.
	"ssl.ca.location": stringProperty("ssl.ca.location", func(s string) Opt {
		return security(func(c *config) { c.security.caFile, c.security.caFrom = s, "ssl.ca.location" })
	}),
	"ssl.truststore.location": stringProperty("ssl.truststore.location", func(s string) Opt {
		return security(func(c *config) { c.security.caFile, c.security.caFrom = s, "ssl.truststore.location" })
	}),
	"ssl.truststore.type": pemTypeProperty("ssl.truststore.type", "export the certificates with keytool -exportcert -rfc"),
	"ssl.certificate.location": stringProperty("ssl.certificate.location", func(s string) Opt {
		return security(func(c *config) { c.security.certFile, c.security.keystore = s, "" })
	}),
	"ssl.key.location": stringProperty("ssl.key.location", func(s string) Opt {
		return security(func(c *config) { c.security.keyFile, c.security.keystore = s, "" })
	}),
	"ssl.keystore.location": stringProperty("ssl.keystore.location", func(s string) Opt {
		return security(func(c *config) { c.security.keystore, c.security.certFile, c.security.keyFile = s, "", "" })
	}),
	"ssl.keystore.type": pemTypeProperty("ssl.keystore.type", "convert it with openssl pkcs12 -nodes (keytool -importkeystore -deststoretype PKCS12 first for JKS), then encrypt the key with openssl pkcs8 -topk8 -v2 aes-256-cbc"),
	"ssl.key.password": {accepted: "a string", secret: true, parse: func(v string) (Opt, error) {
		return security(func(c *config) { c.security.keyPass = secret(v) }), nil
	}},
}

// pemTypeProperty is ssl.truststore.type or ssl.keystore.type: only PEM,
// since Go reads neither JKS nor (without a dependency) PKCS12 stores.
func pemTypeProperty(key, convert string) property {
	return property{accepted: "PEM", parse: func(v string) (Opt, error) {
		switch t := strings.ToUpper(strings.TrimSpace(v)); t {
		case "PEM":
			return security(func(*config) {}), nil
		case "JKS", "PKCS12":
			return nil, fmt.Errorf("%s: %s stores are not read, only PEM: %s", key, t, convert)
		}
		return nil, fmt.Errorf("%s: %q is not PEM", key, v)
	}}
}

// refusedKeys are Java client keys that make no sense with what kconsist
// reads; their errors say why rather than "unknown".
var refusedKeys = map[string]string{
	"ssl.truststore.password": "a PEM truststore has no password (Kafka refuses one with ssl.truststore.type=PEM too)",
	"ssl.keystore.password":   "a PEM keystore has no store password (Kafka refuses one with ssl.keystore.type=PEM too); an encrypted key's password is ssl.key.password",
}

// PropertyKeys returns the configuration keys the factory understands,
// sorted: the Java client's and librdkafka's names.
func PropertyKeys() []string {
	keys := make([]string, 0, len(properties))
	for k := range properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// FromProperties turns client properties into options. It takes the Java
// client's names and librdkafka's where they differ (ssl.truststore.* or
// ssl.ca.location, ssl.keystore.* or ssl.certificate.location and
// ssl.key.location, sasl.jaas.config or sasl.username and sasl.password);
// one map may use either, not both for one setting. Unknown
// keys and bad values are errors that name the key and what it accepts; all
// of them are reported, not just the first. sasl.* keys need a SASL
// security.protocol and ssl.* keys an SSL one: the Java client would ignore
// them, leaving a connection without the authentication or encryption the
// file asks for. Errors never show the value of sasl.password,
// sasl.jaas.config or ssl.key.password.
func FromProperties(props map[string]string) ([]Opt, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys) // errors in a stable order
	var opts []Opt
	var errs []string
	for _, k := range keys {
		p, ok := properties[k]
		if why, refused := refusedKeys[k]; refused {
			errs = append(errs, k+": "+why)
			continue
		}
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: unknown configuration key (known: %s)", k, strings.Join(PropertyKeys(), ", ")))
			continue
		}
		o, err := p.parse(props[k])
		if err != nil {
			msg := err.Error()
			var quiet *jaasError
			if p.secret && !errors.As(err, &quiet) {
				msg = k + ": bad value"
			}
			errs = append(errs, msg+" (accepted: "+p.accepted+")")
			continue
		}
		opts = append(opts, o)
	}
	errs = append(errs, protocolErrors(props, keys)...)
	errs = append(errs, pairErrors(props)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return opts, nil
}

// protocolErrors reports sasl.* and ssl.* keys that security.protocol does
// not use; keys is sorted.
func protocolErrors(props map[string]string, keys []string) []string {
	prot, named := props["security.protocol"]
	prot = strings.ToUpper(strings.TrimSpace(prot))
	if !named {
		prot = "not set (PLAINTEXT)"
	}
	var errs []string
	for _, layer := range []struct{ prefix, a, b string }{
		{"sasl.", "SASL_PLAINTEXT", "SASL_SSL"},
		{"ssl.", "SSL", "SASL_SSL"},
	} {
		if prot == layer.a || prot == layer.b {
			continue
		}
		var given []string
		for _, k := range keys {
			if strings.HasPrefix(k, layer.prefix) {
				given = append(given, k)
			}
		}
		if len(given) > 0 {
			errs = append(errs, fmt.Sprintf("%s: given, but security.protocol is %s; they need %s or %s", strings.Join(given, ", "), prot, layer.a, layer.b))
		}
	}
	return errs
}

// pairErrors reports keys that need another key, or exclude one, in the
// same properties.
func pairErrors(props map[string]string) []string {
	var errs []string
	has := func(k string) bool { _, ok := props[k]; return ok }
	for _, store := range []string{"ssl.truststore", "ssl.keystore"} {
		if has(store+".location") && !has(store+".type") {
			errs = append(errs, fmt.Sprintf("%s.type: required as PEM with %s.location: the Java client's default, JKS, is not read", store, store))
		}
	}
	for _, pair := range [][2]string{
		{"ssl.truststore.location", "ssl.ca.location"},
		{"ssl.keystore.location", "ssl.certificate.location"},
		{"ssl.keystore.location", "ssl.key.location"},
		{"sasl.jaas.config", "sasl.username"},
		{"sasl.jaas.config", "sasl.password"},
	} {
		if has(pair[0]) && has(pair[1]) {
			errs = append(errs, fmt.Sprintf("%s and %s: both given; they say the same thing in the Java client's and librdkafka's words, give one", pair[0], pair[1]))
		}
	}
	return errs
}

// LoadProperties reads a Java .properties file and returns its options; see
// [ParseProperties] and [FromProperties].
func LoadProperties(path string) ([]Opt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	defer f.Close()
	props, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return FromProperties(props)
}

// ParseProperties reads the Java .properties format: "key=value",
// "key: value" or "key value" lines; '#' and '!' comments; a trailing
// backslash continues a line; \t \n \r \f \uXXXX and escaped separators are
// unescaped; a leading UTF-8 byte order mark is skipped. A key given twice
// keeps its last value, as in Java. Errors name the line and the key but
// never show a value, which may be a password. Lines are limited to 1 MiB.
func ParseProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	lineNo := 0
	var logical strings.Builder
	for sc.Scan() {
		lineNo++
		text := sc.Text()
		if lineNo == 1 {
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		line := strings.TrimLeft(text, " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if continues(line) {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrConfig, lineNo, err)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes", ErrConfig, lineNo+1, maxLine)
		}
		return nil, fmt.Errorf("%w: line %d: %v", ErrConfig, lineNo+1, err)
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrConfig, lineNo, err)
		}
		props[k] = v
	}
	return props, nil
}

// maxLine bounds a line of a .properties file.
const maxLine = 1 << 20

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line into its unescaped key and value.
// Its errors show neither.
func splitProperty(line string) (string, string, error) {
	var key strings.Builder
	i := 0
	for i < len(line) {
		ch := line[i]
		if ch == '\\' && i+1 < len(line) {
			r, w, err := unescape(line[i:])
			if err != nil {
				return "", "", fmt.Errorf("key: %v", err)
			}
			key.WriteString(r)
			i += w
			continue
		}
		if ch == '=' || ch == ':' || ch == ' ' || ch == '\t' || ch == '\f' {
			break
		}
		key.WriteByte(ch)
		i++
	}
	if key.Len() == 0 {
		return "", "", errors.New("no key before the value")
	}
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	var val strings.Builder
	for j := 0; j < len(rest); {
		if rest[j] == '\\' && j+1 < len(rest) {
			r, w, err := unescape(rest[j:])
			if err != nil {
				return "", "", fmt.Errorf("value of %q: %v", key.String(), err)
			}
			val.WriteString(r)
			j += w
			continue
		}
		val.WriteByte(rest[j])
		j++
	}
	return key.String(), val.String(), nil
}

// unescape decodes the escape at the start of s (s[0] is a backslash). Its
// errors do not quote s: it may be part of a password.
func unescape(s string) (string, int, error) {
	switch c := s[1]; c {
	case 't':
		return "\t", 2, nil
	case 'n':
		return "\n", 2, nil
	case 'r':
		return "\r", 2, nil
	case 'f':
		return "\f", 2, nil
	case 'u':
		if len(s) < 6 {
			return "", 0, errors.New("\\u escape with fewer than 4 hex digits")
		}
		n, err := strconv.ParseUint(s[2:6], 16, 16)
		if err != nil {
			return "", 0, errors.New("\\u escape not followed by 4 hex digits")
		}
		return string(rune(n)), 6, nil
	default:
		return string(c), 2, nil
	}
}
