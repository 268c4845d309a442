package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/plugins/internal/strategypb"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Client calls a plugin's strategies. Every call is bounded by its ctx. Errors are
// ErrUnknownInstance, ErrUnavailable, the ctx's error, or the plugin's own error text.
type Client struct {
	c strategypb.StrategiesClient
}

// Info returns the plugin's version and strategy names.
func (c *Client) Info(ctx context.Context) (version string, names []string, err error) {
	resp, err := c.c.Info(ctx, &strategypb.InfoRequest{})
	if err != nil {
		return "", nil, callErr(ctx, err)
	}
	return resp.GetVersion(), resp.GetStrategies(), nil
}

// Create makes an instance of the named strategy from params.
func (c *Client) Create(ctx context.Context, name string, params map[string]any) (uint64, Capabilities, error) {
	req := &strategypb.CreateRequest{Name: name}
	if len(params) > 0 {
		b, err := json.Marshal(params)
		if err != nil {
			return 0, Capabilities{}, fmt.Errorf("strategy params: %w", err)
		}
		req.ParamsJson = b
	}
	resp, err := c.c.Create(ctx, req)
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
			return 0, Capabilities{}, answered(strategy.ErrUnknown, st.Message())
		}
		return 0, Capabilities{}, callErr(ctx, err)
	}
	return resp.GetId(), Capabilities{RouteLimiter: resp.GetRouteLimiter(), Adjuster: resp.GetAdjuster()}, nil
}

// OpenProducer asks instance id for a producer decision.
func (c *Client) OpenProducer(ctx context.Context, id uint64, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	resp, err := c.c.OpenProducer(ctx, producerRequestToProto(id, req))
	if err != nil {
		return strategy.ProducerDecision{}, callErr(ctx, err)
	}
	return producerDecisionFromProto(resp), nil
}

// OpenConsumer asks instance id for a consumer decision.
func (c *Client) OpenConsumer(ctx context.Context, id uint64, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	resp, err := c.c.OpenConsumer(ctx, consumerRequestToProto(id, req))
	if err != nil {
		return strategy.ConsumerDecision{}, callErr(ctx, err)
	}
	return consumerDecisionFromProto(resp), nil
}

// RouteLimits asks instance id for its route limits.
func (c *Client) RouteLimits(ctx context.Context, id uint64) (strategy.RouteLimits, error) {
	resp, err := c.c.RouteLimits(ctx, &strategypb.RouteLimitsRequest{Id: id})
	if err != nil {
		return strategy.RouteLimits{}, callErr(ctx, err)
	}
	return routeLimitsFromProto(resp), nil
}

// Adjust gives instance id a pressure snapshot.
func (c *Client) Adjust(ctx context.Context, id uint64, p strategy.Pressure) (strategy.Adjustment, error) {
	resp, err := c.c.Adjust(ctx, pressureToProto(id, p))
	if err != nil {
		return strategy.Adjustment{}, callErr(ctx, err)
	}
	return adjustmentFromProto(resp), nil
}

// Close closes instance id.
func (c *Client) Close(ctx context.Context, id uint64) error {
	if _, err := c.c.Close(ctx, &strategypb.CloseRequest{Id: id}); err != nil {
		return callErr(ctx, err)
	}
	return nil
}

// answered is a plugin's answer as sentinel, with the answer's text after it. The server's
// message may start with sentinel's text already ("unknown strategy (known: …)", "unknown
// strategy instance 3"), which is then not repeated.
func answered(sentinel error, msg string) error {
	if rest, ok := strings.CutPrefix(msg, sentinel.Error()); ok {
		return fmt.Errorf("%w%s", sentinel, rest)
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}

// callErr turns a gRPC error into one of the package's: the ctx's error when the ctx ended
// the call, ErrUnknownInstance, ErrUnavailable, or the plugin's message.
func callErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.FailedPrecondition:
		return answered(ErrUnknownInstance, st.Message())
	case codes.Unavailable, codes.Canceled:
		return answered(ErrUnavailable, st.Message())
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	default:
		return errors.New(st.Message())
	}
}
