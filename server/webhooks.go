package server

import (
	"math"
	"net/http"

	"github.com/asmp-dev/asmp/auth"
	"github.com/asmp-dev/asmp/engine"
	"github.com/asmp-dev/asmp/internal/edge/httpx"
	"github.com/asmp-dev/asmp/internal/edge/paging"
	"github.com/asmp-dev/asmp/protocol"
	"github.com/asmp-dev/asmp/workflow"
)

// webhookRoutes are the subscriptions API (SPEC section 18), admin scope,
// at the root only: a subscription names its workflow in its body.
func (s *Server) webhookRoutes() []httpx.Route {
	r := func(method, path string, h apiFunc) httpx.Route {
		return httpx.Route{Method: method, Path: path, Scope: auth.ScopeAdmin, Handle: s.api(h)}
	}
	return []httpx.Route{
		r(http.MethodPost, "/webhooks", s.createWebhook),
		r(http.MethodGet, "/webhooks", s.listWebhooks),
		r(http.MethodGet, "/webhooks/{id}", s.getWebhook),
		r(http.MethodDelete, "/webhooks/{id}", s.deleteWebhook),
		r(http.MethodPost, "/webhooks/{id}/rotate", s.rotateWebhook),
		r(http.MethodGet, "/webhooks/{id}/deliveries", s.listDeliveries),
		r(http.MethodGet, "/webhooks/{id}/deliveries/{delivery_id}", s.getDelivery),
		r(http.MethodPost, "/webhooks/{id}/deliveries/{delivery_id}/redeliver", s.redeliver),
	}
}

var (
	webhookList  = paging.List{Name: "webhooks", Default: 100, Max: 256}
	deliveryList = paging.List{Name: "deliveries", Default: 50, Max: 500}
	// attemptList pages a delivery's attempts (GET …/deliveries/{delivery_id}).
	attemptList = paging.List{Name: "attempts", Default: engine.DefaultAttemptPage, Max: 500}
)

func stringList(v any, field string) ([]string, error) {
	a, ok := v.([]any)
	if !ok && v != nil {
		return nil, protocol.Errorf(protocol.EInvalid, "%s must be an array of strings.", field).With("field", field)
	}
	out := make([]string, 0, len(a))
	for _, x := range a {
		str, ok := x.(string)
		if !ok {
			return nil, protocol.Errorf(protocol.EInvalid, "%s must be an array of strings.", field).With("field", field)
		}
		out = append(out, str)
	}
	return out, nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var req protocol.WebhookRequest
	for k, v := range body {
		switch k {
		case "url", "workflow_id":
			str, ok := v.(string)
			if !ok && v != nil {
				return protocol.Errorf(protocol.EInvalid, "%s must be a string.", k).With("field", k)
			}
			if k == "url" {
				req.URL = str
			} else {
				req.WorkflowID = str
			}
		case "events":
			if req.Events, err = stringList(v, k); err != nil {
				return err
			}
		case "states":
			if req.States, err = stringList(v, k); err != nil {
				return err
			}
		default:
			return protocol.Errorf(protocol.EInvalid, "Unknown field %q: the body of POST /webhooks takes url, events, workflow_id and states.", protocol.Truncate(k, 64)).With("field", protocol.Truncate(k, 64))
		}
	}
	sub, err := s.e.CreateWebhook(r.Context(), req)
	if err != nil {
		return err
	}
	s.absWebhook(&sub, c)
	w.Header().Set("Location", sub.Href)
	httpx.WriteJSON(w, http.StatusCreated, sub)
	return nil
}

func (s *Server) absWebhook(sub *protocol.WebhookSubscription, c *call) {
	sub.Href, sub.DeliveriesHref = c.root+sub.Href, c.root+sub.DeliveriesHref
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := paging.Only(r.URL.Query(), "GET /webhooks", "limit", "cursor"); err != nil {
		return err
	}
	p, err := webhookList.Parse(r.URL.Query())
	if err != nil {
		return err
	}
	l, err := s.e.Webhooks(r.Context(), p.After, p.Limit)
	if err != nil {
		return err
	}
	for i := range l.Webhooks {
		s.absWebhook(&l.Webhooks[i], c)
	}
	if l.NextCursor != nil {
		l.NextCursor = webhookList.Next(*l.NextCursor, true)
	}
	httpx.WriteJSON(w, http.StatusOK, l)
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	sub, err := s.e.Webhook(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.absWebhook(&sub, c)
	httpx.WriteJSON(w, http.StatusOK, sub)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, _ *call) error {
	if err := s.e.DeleteWebhook(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rotateWebhook(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	grace := engine.DefaultSecretGrace
	for k, v := range body {
		switch k {
		case "grace":
			str, ok := v.(string)
			if !ok {
				return protocol.Errorf(protocol.EInvalid, `grace must be a duration string such as "24h" ("0s" revokes the old secret now).`).With("field", k)
			}
			if grace, err = workflow.ParseDuration(str); err != nil {
				return protocol.Errorf(protocol.EInvalid, `grace must be a duration such as "24h", "2d" or "30m" ("0s" revokes the old secret now), not %q.`, protocol.Truncate(str, 20)).With("field", k)
			}
		default:
			return protocol.Errorf(protocol.EInvalid, "Unknown field %q: the body of POST /webhooks/{id}/rotate takes grace.", protocol.Truncate(k, 64)).With("field", protocol.Truncate(k, 64))
		}
	}
	sub, err := s.e.RotateWebhookSecret(r.Context(), r.PathValue("id"), grace)
	if err != nil {
		return err
	}
	s.absWebhook(&sub, c)
	httpx.WriteJSON(w, http.StatusOK, sub)
	return nil
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := paging.Only(r.URL.Query(), "GET /webhooks/{id}/deliveries", "limit", "cursor"); err != nil {
		return err
	}
	list := deliveryList.Of(r.PathValue("id"))
	p, err := list.Parse(r.URL.Query())
	if err != nil {
		return err
	}
	l, err := s.e.WebhookDeliveries(r.Context(), r.PathValue("id"), p.After, p.Limit)
	if err != nil {
		return err
	}
	for i := range l.Deliveries {
		l.Deliveries[i].Href = c.root + l.Deliveries[i].Href
	}
	if l.NextCursor != nil {
		l.NextCursor = list.Next(*l.NextCursor, true)
	}
	httpx.WriteJSON(w, http.StatusOK, l)
	return nil
}

func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := paging.Only(r.URL.Query(), "GET /webhooks/{id}/deliveries/{delivery_id}", "limit", "cursor"); err != nil {
		return err
	}
	list := attemptList.Of(r.PathValue("delivery_id"))
	p, err := list.Parse(r.URL.Query())
	if err != nil {
		return err
	}
	after, err := paging.Seq(p.After, "cursor")
	if err != nil || after > math.MaxInt32 {
		return protocol.Errorf(protocol.EInvalid, "cursor %q is not a cursor of attempts: pass back the history_next_cursor of the previous page as given.", protocol.Truncate(r.URL.Query().Get("cursor"), 40)).With("field", "cursor")
	}
	d, err := s.e.WebhookDelivery(r.Context(), r.PathValue("id"), r.PathValue("delivery_id"), int(after), p.Limit)
	if err != nil {
		return err
	}
	if d.HistoryNextCursor != nil {
		d.HistoryNextCursor = list.Next(*d.HistoryNextCursor, true)
	}
	d.Href = c.root + d.Href
	httpx.WriteJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) redeliver(w http.ResponseWriter, r *http.Request, c *call) error {
	body, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	for k := range body {
		return protocol.Errorf(protocol.EInvalid, "Unknown field %q: POST …/redeliver takes no body (or {}).", protocol.Truncate(k, 64)).With("field", protocol.Truncate(k, 64))
	}
	d, err := s.e.Redeliver(r.Context(), r.PathValue("id"), r.PathValue("delivery_id"))
	if err != nil {
		return err
	}
	d.Href = c.root + d.Href
	httpx.WriteJSON(w, http.StatusAccepted, d)
	return nil
}
