package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// clickhouseFlags say where the flows table is (map, policy).
type clickhouseFlags struct {
	url, user       string
	plainPassword   bool
	database, table string
}

// register adds the flags; instead says what --clickhouse replaces, if anything.
func (c *clickhouseFlags) register(fs *pflag.FlagSet, instead string) {
	usage := "read ClickHouse's flows table over HTTP at this URL (e.g. http://127.0.0.1:8123)"
	if instead != "" {
		usage += " " + instead
	}
	fs.StringVar(&c.url, "clickhouse", "", usage+"; password from $CLICKHOUSE_PASSWORD")
	fs.StringVar(&c.user, "clickhouse-user", "", "ClickHouse user (default the server's default user); --user is the kubeconfig user, as in kubectl")
	fs.BoolVar(&c.plainPassword, "send-password-over-plain-http", false, "send $CLICKHOUSE_PASSWORD to an http:// --clickhouse URL of a non-loopback host: anyone on the network path reads it")
	fs.StringVar(&c.database, "database", "default", "ClickHouse database of the flows table")
	fs.StringVar(&c.table, "table", "flows", "ClickHouse flows table")
}

// query runs the query query(table) returns (table is the quoted
// database.table) over ClickHouse's HTTP interface and hands each row of
// its JSONEachRow result to row. A password goes in cleartext over http://
// only to loopback (a port-forward) or with plainPassword.
func (c *clickhouseFlags) query(ctx context.Context, query func(table string) string, row func(map[string]json.RawMessage) error) error {
	for _, n := range []string{c.database, c.table} {
		if n == "" || strings.ContainsAny(n, "`\\") {
			return fmt.Errorf("--database, --table: %q is not a plain ClickHouse name", n)
		}
	}
	u, err := url.Parse(c.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--clickhouse: %q is not an http:// or https:// URL of ClickHouse's HTTP interface (port 8123 by default)", c.url)
	}
	password := os.Getenv("CLICKHOUSE_PASSWORD")
	if password != "" && u.Scheme == "http" && !c.plainPassword && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("--clickhouse %s: refusing to send $CLICKHOUSE_PASSWORD over plain HTTP to a non-loopback host, where anyone on the way reads it: use https:// (ClickHouse's HTTPS port, 8443 by default), or kubectl port-forward and http://127.0.0.1:8123, or add --send-password-over-plain-http to accept that", c.url)
	}
	q := query("`" + c.database + "`.`" + c.table + "`")
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(q))
	if err != nil {
		return err
	}
	if c.user != "" || password != "" {
		req.SetBasicAuth(c.user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("--clickhouse: %w (is ClickHouse's HTTP interface reachable?)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("clickhouse: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var r map[string]json.RawMessage
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("clickhouse: reading the result: %w", err)
		}
		if err := row(r); err != nil {
			return fmt.Errorf("clickhouse: reading the result: %w", err)
		}
	}
}

// chUint reads a ClickHouse UInt64 from JSON, quoted (the default) or not.
type chUint uint64

func (u *chUint) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseUint(strings.Trim(string(b), `"`), 10, 64)
	*u = chUint(v)
	return err
}

// loopbackHost: host is localhost or a loopback address (no name is resolved).
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
