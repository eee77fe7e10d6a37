package lockward

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// redisURL is what a redis://, rediss://, redis+cluster://,
// redis+sentinel:// or redlock:// URL says, in the forms the lockward CLI
// takes.
type redisURL struct {
	tls      bool
	cluster  bool
	primary  string   // redis+sentinel://: the name the sentinels monitor
	addrs    []string // the server, the cluster's seed nodes, or the sentinels
	db       int
	user     string
	password string
	prefix   string
	// The sentinels' own credentials (sentinel_user=, sentinel_password=).
	sentinelUser, sentinelPassword string
	ca, cert, key                  string // PEM files (rediss only)
	// replicas=N: a grant or renewal is answered once N replicas confirm
	// it (WAIT), within replicasTimeout (replicas_timeout=, 1 s).
	replicas        int
	replicasTimeout time.Duration
}

// The bounds of replicas= and replicas_timeout=, as the Rust store has them.
const (
	maxReplicas            = 64
	defaultReplicasTimeout = time.Second
	maxReplicasTimeout     = 1500 * time.Millisecond
)

// defaultRedisPrefix starts every key lockward writes on Redis unless the
// URL's prefix= says otherwise.
const defaultRedisPrefix = "lockward:"

// parseRedisURL reads raw; its errors never repeat the password.
func parseRedisURL(raw string) (*redisURL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, urlError("no scheme: write redis://HOST:PORT")
	}
	u := &redisURL{
		tls: strings.HasPrefix(scheme, "rediss"),
		// Redlock's masters are listed as a cluster's seed nodes are.
		cluster: strings.HasSuffix(scheme, "+cluster") || scheme == "redlock",
		prefix:  defaultRedisPrefix,
	}
	sentinels := strings.HasSuffix(scheme, "+sentinel")
	rest, rawQuery, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user, password, hasPassword := strings.Cut(hosts[:at], ":")
		var err error
		if u.user, err = url.PathUnescape(user); err != nil {
			return nil, urlError("the user name is not percent-encoded correctly")
		}
		if hasPassword {
			if u.password, err = url.PathUnescape(password); err != nil {
				return nil, urlError("the password is not percent-encoded correctly")
			}
		}
		hosts = hosts[at+1:]
	}
	port := "6379"
	if sentinels {
		port = "26379"
	}
	for _, host := range strings.Split(hosts, ",") {
		addr, err := withPort(host, port)
		if err != nil {
			return nil, err
		}
		u.addrs = append(u.addrs, addr)
	}
	if len(u.addrs) > 1 && !u.cluster && !sentinels {
		return nil, urlError("one server per redis:// URL; for several, use redis+cluster:// or redis+sentinel://")
	}
	path = strings.Trim(path, "/")
	if sentinels {
		primary, db, _ := strings.Cut(path, "/")
		if primary == "" {
			return nil, urlError("name the primary the sentinels monitor in the path: redis+sentinel://HOST:26379/NAME")
		}
		u.primary, path = primary, db
	}
	if path != "" {
		if scheme == "redlock" {
			return nil, urlError("redlock:// takes no database index")
		}
		if u.cluster {
			return nil, urlError("a Redis Cluster has only database 0; remove the /N from the URL")
		}
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return nil, urlError(fmt.Sprintf("the database index %q is not a number", path))
		}
		u.db = db
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, urlError("the query is not key=value pairs joined by &")
	}
	for key, values := range query {
		value := values[len(values)-1]
		switch {
		case key == "prefix":
			u.prefix = value
		case key == "ca" && u.tls:
			u.ca = value
		case key == "cert" && u.tls:
			u.cert = value
		case key == "key" && u.tls:
			u.key = value
		case key == "sentinel_user" && sentinels:
			u.sentinelUser = value
		case key == "sentinel_password" && sentinels:
			u.sentinelPassword = value
		case key == "replicas" && scheme != "redlock":
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > maxReplicas {
				return nil, urlError(fmt.Sprintf("replicas=%q: give how many replicas must confirm a grant, 1 to %d", value, maxReplicas))
			}
			u.replicas = n
		case key == "replicas_timeout" && scheme != "redlock":
			d, err := time.ParseDuration(value)
			if err != nil || d < time.Millisecond || d > maxReplicasTimeout {
				return nil, urlError(fmt.Sprintf("replicas_timeout %q: give a duration from 1ms to %dms, such as 500ms", value, maxReplicasTimeout.Milliseconds()))
			}
			u.replicasTimeout = d
		default:
			return nil, urlError(fmt.Sprintf("unknown option %q for %s://", key, scheme))
		}
	}
	switch {
	case u.replicasTimeout > 0 && u.replicas == 0:
		return nil, urlError("replicas_timeout= needs replicas=N beside it")
	case u.replicas > 0 && u.cluster:
		return nil, urlError("replicas= is not supported on a Redis Cluster: WAIT must follow the grant on its node's connection; use redis:// or redis+sentinel://")
	case u.replicas > 0 && u.replicasTimeout == 0:
		u.replicasTimeout = defaultReplicasTimeout
	}
	if (u.cert == "") != (u.key == "") {
		return nil, urlError("cert= and key= go together: give both or neither")
	}
	return u, nil
}

// withPort is host with port added when it names none.
func withPort(host, port string) (string, error) {
	if host == "" {
		return "", urlError("no host: write redis://HOST:PORT")
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", urlError(fmt.Sprintf("the port of %q is not a number below 65536", host))
		}
		return net.JoinHostPort(h, p), nil
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port), nil
}

// tlsConfig is the TLS to use, or nil for plain text.
func (u *redisURL) tlsConfig() (*tls.Config, error) {
	if !u.tls {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if u.ca != "" {
		pem, err := os.ReadFile(u.ca)
		if err != nil {
			return nil, urlError(fmt.Sprintf("ca=%s cannot be read: %v", u.ca, err))
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, urlError(fmt.Sprintf("ca=%s holds no PEM certificate", u.ca))
		}
	}
	if u.cert != "" {
		pair, err := tls.LoadX509KeyPair(u.cert, u.key)
		if err != nil {
			return nil, urlError(fmt.Sprintf("cert=%s and key=%s are not a certificate and its key: %v", u.cert, u.key, err))
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

func urlError(message string) error {
	return &Error{Kind: "InvalidArgument", Message: "store URL: " + message}
}
