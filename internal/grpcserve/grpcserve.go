// Package grpcserve runs the gRPC servers of flowtel's components in the
// background.
package grpcserve

import (
	"errors"
	"net"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Serve serves s on ln in a goroutine wg counts. An end other than Stop or
// GracefulStop (grpc.ErrServerStopped) is logged as msg.
func Serve(wg *sync.WaitGroup, s *grpc.Server, ln net.Listener, logger *zap.Logger, msg string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logger.Error(msg, zap.Error(err))
		}
	}()
}
