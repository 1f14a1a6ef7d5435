package webhook

import "testing"

// A proxy would make the connection the Policy checks, so the environment's
// proxy settings (HTTP_PROXY, HTTPS_PROXY) are never used; a test through
// the environment is unreliable, as net/http reads it once per process.
func TestSenderIgnoresProxies(t *testing.T) {
	for _, o := range []*Options{nil, {}} {
		if s := NewSender(o); s.transport.Proxy != nil {
			t.Fatal("the Sender's transport uses a proxy")
		}
	}
}
