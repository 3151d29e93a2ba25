package inbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/links"
	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/webpush"
)

// TestBrowserWebPushNoticeIsShownAndItsApproveDecides: in Chromium, the
// inbox's service worker takes a push message (delivered through the
// DevTools protocol, as a push service would), shows the notice with its
// title and its Approve and Reject buttons, and its Approve decides the
// refund through the person's own decision link, audited as them.
func TestBrowserWebPushNoticeIsShownAndItsApproveDecides(t *testing.T) {
	s := startSiteOf(t, map[string][]string{"ana": {"finance"}}, cardFlow())
	s.startCard("ana", "r-push", map[string]any{"orderId": "o-2001", "amount": 4800})
	natstest.Eventually(t, "the refund waiting", func() bool { return s.status("r-push") == string(engine.Waiting) })
	link := s.base + s.decisionLink("r-push", "ana", time.Time{})
	c, err := s.svc.Links().Check(strings.TrimPrefix(link, s.base+links.DecidePath), links.KindDecide, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(webpush.Payload{Title: "Refund $4,800.00 on order o-2001", Body: "Amount: $4,800.00", Tag: "t-r-push",
		URL: link, CSRF: s.svc.Links().FormToken(c.ID),
		Actions: []webpush.Action{{Action: "approve", Title: "Approve"}, {Action: "reject", Title: "Reject"}}})
	ctx := startBrowser(t)

	var reg serviceworker.RegistrationID
	step(t, ctx, "register the service worker",
		chromedp.Navigate(s.base+"/login"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted, Origin: s.base})
			return err
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			ev, err := chromedp.WaitEvent(serviceworker.WorkerRegistrationUpdated, func(e serviceworker.EventWorkerRegistrationUpdated) bool {
				for _, r := range e.Registrations {
					if r.ScopeURL == s.base+"/" && !r.IsDeleted {
						return true
					}
				}
				return false
			}, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				if _, err := cdp.Call(ctx, tg, serviceworker.Enable, cdp.Empty{}); err != nil {
					return err
				}
				_, err := chromedp.Evaluate[chromedp.Void](`navigator.serviceWorker.register("/sw.js", {scope: "/"}).then(() => navigator.serviceWorker.ready).then(() => { window.swReady = true; })`)(ctx, tg)
				return err
			}))(ctx, tg)
			for _, r := range ev.Registrations {
				if r.ScopeURL == s.base+"/" {
					reg = r.RegistrationID
				}
			}
			return err
		}),
		until(`window.swReady === true`),
	)
	// A push message that reaches the worker while the browser still
	// starts it may be dropped, as a push service may deliver one twice:
	// it is delivered until the notice shows (the tag keeps it one).
	deliver := func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: s.base, RegistrationID: reg, Data: string(payload)})
		return err
	}
	shown := `(() => {
			navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => {
				window.notices = ns.map(n => n.title + "|" + n.actions.map(a => a.action).join(","));
			});
			return Array.isArray(window.notices) && window.notices.includes("Refund $4,800.00 on order o-2001|approve,reject");
		})()`
	step(t, ctx, "deliver the push message and see the notice", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for {
			if err := deliver(ctx, tg); err != nil {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := chromedp.Poll[chromedp.Void](shown, chromedp.WithPollingTimeout(2*time.Second))(pctx, tg)
			cancel()
			if err == nil || ctx.Err() != nil {
				return err
			}
		}
	}))
	// Approve, as the notice's button does; asked again while the run
	// still waits (a message to a worker the browser is restarting may
	// be lost; the link decides once whatever the number of taps).
	approve := chromedp.Evaluate[chromedp.Void](`navigator.serviceWorker.ready.then(r => r.active.postMessage({act: "approve", tag: "t-r-push"}))`)
	step(t, ctx, "approve on the notice", approve)
	polls := 0
	natstest.Eventually(t, "the refund approved", func() bool {
		if s.status("r-push") == string(engine.Completed) {
			return true
		}
		if polls++; polls%200 == 0 { // every 2 s
			step(t, ctx, "approve on the notice again", approve)
		}
		return false
	})
	// The notice that asked is gone from the device (a confirmation may
	// take its place).
	step(t, ctx, "see the notice that asked gone",
		until(`(() => {
			navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => { window.asking = ns.filter(n => n.data && n.data.csrf).length; });
			return window.asking === 0;
		})()`),
	)
	recs, err := s.svc.Client("/test").VouchedAudit(t.Context(), "refund", "r-push")
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Action != protocol.ActionApproved || last.By != "ana" {
		t.Errorf("the last audit record is %s by %s, want approved by ana", last.Action, last.By)
	}
}
