# syntax=docker/dockerfile:1
#
# chatd in a container: a static binary on a small base, running as an
# unprivileged user, with the database on one volume.
#
#   docker build -t chatd .
#   docker run -d --name chatd -p 127.0.0.1:8080:8080 -v chatd-data:/data chatd
#   docker exec chatd chatd create-user --handle you --name "Your Name"

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/chatd .

FROM alpine:3.22
RUN adduser -D -H -u 10001 chatd && mkdir /data && chown chatd:chatd /data
COPY --from=build /out/chatd /usr/local/bin/chatd
USER chatd
# Inside the container chatd must listen on all interfaces for the published
# port to reach it; publish it on 127.0.0.1 (as above) or behind a proxy.
ENV CHATD_DB=/data/chatd.db \
    CHATD_ADDR=0.0.0.0:8080
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s \
    CMD wget -q -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["chatd"]
CMD ["serve"]
