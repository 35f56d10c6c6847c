// Command portsrv is the app the port-route tests run inside a sandbox:
// an HTTP server on 127.0.0.1:PORT with /hello (echoes what the proxy
// forwarded), /big?n= (n bytes), /setcookie?c=COOKIE (sets each c) and /ws (a WebSocket echo).
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from inside\npath=%s\nquery=%s\nprefix=%s\nauthorization=%q\ncookie=%q\nhost=%s\n",
			r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Forwarded-Prefix"), r.Header.Get("Authorization"), r.Header.Get("Cookie"), r.Host)
	})
	mux.HandleFunc("/setcookie", func(w http.ResponseWriter, r *http.Request) {
		for _, c := range r.URL.Query()["c"] {
			w.Header().Add("Set-Cookie", c)
		}
		fmt.Fprintln(w, "cookies set")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
