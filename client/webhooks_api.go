package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/asmp-dev/asmp/protocol"
)

// The webhook subscriptions API (SPEC section 18) lives at the server's
// root, also when the client's base URL is a workflow-scoped API; every
// call needs a token with the admin scope.

// Webhook types of the API, as the server sends them.
type (
	// WebhookRequest is the body of CreateWebhook.
	WebhookRequest = protocol.WebhookRequest
	// WebhookSubscription is a subscription; Secret is set only by
	// CreateWebhook and RotateWebhookSecret.
	WebhookSubscription = protocol.WebhookSubscription
	// WebhookList is a page of subscriptions.
	WebhookList = protocol.WebhookList
	// WebhookDelivery is one message to one subscription and its fate.
	WebhookDelivery = protocol.WebhookDelivery
	// WebhookDeliveryList is a page of deliveries, newest first.
	WebhookDeliveryList = protocol.WebhookDeliveryList
)

// rootURL returns the URL of path at the server's root.
func (c *Client) rootURL(path string, q url.Values) string {
	u := strings.TrimSuffix(c.apiURL("", nil), "/api/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func pageQuery(cursor string, limit int) url.Values {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

func (c *Client) webhookCall(ctx context.Context, method, path string, q url.Values, body any, out any, what string) error {
	r, err := c.do(ctx, method, c.rootURL(path, q), body, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return decodeInto(r, out, what)
}

// CreateWebhook subscribes req.URL to the event types req.Events (POST
// /webhooks). The answer's Secret is shown this once: keep it to verify
// messages (VerifyWebhook).
func (c *Client) CreateWebhook(ctx context.Context, req WebhookRequest) (*WebhookSubscription, error) {
	var out WebhookSubscription
	return &out, c.webhookCall(ctx, http.MethodPost, "/webhooks", nil, req, &out, "subscription")
}

// Webhooks returns a page of subscriptions (GET /webhooks); cursor is the
// previous page's NextCursor ("" for the first), limit 0 the server's
// default.
func (c *Client) Webhooks(ctx context.Context, cursor string, limit int) (*WebhookList, error) {
	var out WebhookList
	return &out, c.webhookCall(ctx, http.MethodGet, "/webhooks", pageQuery(cursor, limit), nil, &out, "subscription list")
}

// Webhook returns one subscription (GET /webhooks/{id}), without its
// secret.
func (c *Client) Webhook(ctx context.Context, id string) (*WebhookSubscription, error) {
	var out WebhookSubscription
	return &out, c.webhookCall(ctx, http.MethodGet, "/webhooks/"+url.PathEscape(id), nil, nil, &out, "subscription")
}

// DeleteWebhook removes a subscription and its deliveries (DELETE
// /webhooks/{id}).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.webhookCall(ctx, http.MethodDelete, "/webhooks/"+url.PathEscape(id), nil, nil, nil, "")
}

// RotateWebhookSecret gives the subscription a new secret, shown this
// once in the answer; the old one keeps signing for grace (a duration such
// as "24h"; "" for the server's default).
func (c *Client) RotateWebhookSecret(ctx context.Context, id, grace string) (*WebhookSubscription, error) {
	body := map[string]any{}
	if grace != "" {
		body["grace"] = grace
	}
	var out WebhookSubscription
	return &out, c.webhookCall(ctx, http.MethodPost, "/webhooks/"+url.PathEscape(id)+"/rotate", nil, body, &out, "subscription")
}

// WebhookDeliveries returns a page of a subscription's deliveries, newest
// first (GET /webhooks/{id}/deliveries).
func (c *Client) WebhookDeliveries(ctx context.Context, id, cursor string, limit int) (*WebhookDeliveryList, error) {
	var out WebhookDeliveryList
	return &out, c.webhookCall(ctx, http.MethodGet, "/webhooks/"+url.PathEscape(id)+"/deliveries", pageQuery(cursor, limit), nil, &out, "delivery list")
}

// WebhookDelivery returns one delivery with its message and the first page
// of its attempts, oldest first (GET /webhooks/{id}/deliveries/{delivery_id}:
// 50 by default); HistoryNextCursor names the next page, for
// WebhookDeliveryPage.
func (c *Client) WebhookDelivery(ctx context.Context, id, deliveryID string) (*WebhookDelivery, error) {
	return c.WebhookDeliveryPage(ctx, id, deliveryID, "", 0)
}

// WebhookDeliveryPage returns one delivery with the page of its attempts
// that cursor names ("" for the first; a HistoryNextCursor otherwise), up
// to limit (0: the server's default, at most 500).
func (c *Client) WebhookDeliveryPage(ctx context.Context, id, deliveryID, cursor string, limit int) (*WebhookDelivery, error) {
	var out WebhookDelivery
	return &out, c.webhookCall(ctx, http.MethodGet, "/webhooks/"+url.PathEscape(id)+"/deliveries/"+url.PathEscape(deliveryID), pageQuery(cursor, limit), nil, &out, "delivery")
}

// Redeliver sends a delivery again now, under its unchanged message id
// (POST /webhooks/{id}/deliveries/{delivery_id}/redeliver).
func (c *Client) Redeliver(ctx context.Context, id, deliveryID string) (*WebhookDelivery, error) {
	var out WebhookDelivery
	return &out, c.webhookCall(ctx, http.MethodPost, "/webhooks/"+url.PathEscape(id)+"/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, map[string]any{}, &out, "delivery")
}
