// Strict mode's table access in two calls: list the entries carrying a mark
// bit, and clear that bit on many of them.
//
// The listing is one dump filtered in the kernel by mark (CTA_MARK/CTA_MARK_MASK),
// returned as packed records rather than text, so 10,000 entries are neither
// printed by a `conntrack -L` process nor parsed back.
//
// `conntrack -U` with a tuple filter dumps the whole table for every line, so
// cutting n connections that way costs n processes or n dumps. Here each entry
// is one IPCTNL_MSG_CT_NEW update naming the original tuple, with CTA_MARK 0
// and CTA_MARK_MASK the bit: the kernel computes (mark & ~bit) itself, so the
// other bits (another agent's, a Service proxy's) are kept and nothing is read
// first. CHUNK updates go to the kernel in one sendto(), which processes them
// in order and queues one acknowledgement each; we read those before the next
// chunk. The work runs on libuv's thread pool, so the two families run in
// parallel and the JavaScript thread keeps answering packets meanwhile.

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <linux/netlink.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>
#include <node_api.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif

// The JavaScript side's packed record (host/dataplane/conntrack-netlink.ts):
// the clear reads the first 44 bytes, the listing fills all 64.
#define RECORD_BYTES 64
#define OFF_PROTOCOL 0
#define OFF_ICMP_TYPE 1
#define OFF_ICMP_CODE 2
#define OFF_SRC_PORT 4
#define OFF_DST_PORT 6
#define OFF_ICMP_ID 8
#define OFF_SRC 12
#define OFF_DST 28
#define OFF_REPLY_SRC_PORT 10
#define OFF_REPLY_SRC 44
#define OFF_MARK 60

// Updates per sendto(): their acknowledgements (about 1 KiB of receive buffer
// each) must fit the socket's receive buffer while we are still sending.
#define CHUNK 256
// An update is at most ~130 bytes (IPv6 tuple, mark, mask); room to spare.
#define MESSAGE_ROOM 512

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int family;
  uint8_t* tuples;
  uint32_t count;
  uint32_t bit;
  uint32_t cleared;
  uint32_t gone;
  uint32_t failed;
  int first_error;
} Job;

static void note_error(Job* job, int error) {
  job->failed++;
  if (job->first_error == 0) job->first_error = error;
}

static int open_socket(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) return -errno;
  int size = 8 << 20;
  // FORCE needs CAP_NET_ADMIN, which changing conntrack needs anyway; the plain one is capped by rmem_max.
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  int one = 1;
  // Acknowledgements without a copy of the request: a quarter of the bytes to read.
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  struct timeval timeout = { .tv_sec = 10, .tv_usec = 0 };
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  struct sockaddr_nl local = { .nl_family = AF_NETLINK };
  if (bind(fd, (struct sockaddr*)&local, sizeof local) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static uint16_t read_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v; // already network order
}

// One update message for record `r` at `out`; returns its length, 0 when it could not be built.
static size_t build_update(char* out, int family, const uint8_t* r, uint32_t seq, uint32_t bit) {
  struct nf_conntrack* ct = nfct_new();
  if (ct == NULL) return 0;
  uint8_t protocol = r[OFF_PROTOCOL];
  if (family == 6) {
    nfct_set_attr_u8(ct, ATTR_L3PROTO, AF_INET6);
    nfct_set_attr(ct, ATTR_IPV6_SRC, r + OFF_SRC);
    nfct_set_attr(ct, ATTR_IPV6_DST, r + OFF_DST);
  } else {
    nfct_set_attr_u8(ct, ATTR_L3PROTO, AF_INET);
    uint32_t src, dst;
    memcpy(&src, r + OFF_SRC, 4);
    memcpy(&dst, r + OFF_DST, 4);
    nfct_set_attr_u32(ct, ATTR_IPV4_SRC, src);
    nfct_set_attr_u32(ct, ATTR_IPV4_DST, dst);
  }
  nfct_set_attr_u8(ct, ATTR_L4PROTO, protocol);
  if (protocol == IPPROTO_ICMP || protocol == IPPROTO_ICMPV6) {
    nfct_set_attr_u8(ct, ATTR_ICMP_TYPE, r[OFF_ICMP_TYPE]);
    nfct_set_attr_u8(ct, ATTR_ICMP_CODE, r[OFF_ICMP_CODE]);
    nfct_set_attr_u16(ct, ATTR_ICMP_ID, read_u16(r + OFF_ICMP_ID));
  } else {
    nfct_set_attr_u16(ct, ATTR_PORT_SRC, read_u16(r + OFF_SRC_PORT));
    nfct_set_attr_u16(ct, ATTR_PORT_DST, read_u16(r + OFF_DST_PORT));
  }
  nfct_set_attr_u32(ct, ATTR_MARK, 0);

  size_t header = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
  memset(out, 0, header);
  struct nlmsghdr* nlh = (struct nlmsghdr*)out;
  nlh->nlmsg_len = header;
  nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
  // No NLM_F_CREATE: an entry that is gone stays gone (ENOENT) instead of being made anew.
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = seq;
  struct nfgenmsg* nfg = (struct nfgenmsg*)(out + NLMSG_HDRLEN);
  nfg->nfgen_family = family == 6 ? AF_INET6 : AF_INET;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = 0;
  int built = nfct_nlmsg_build(nlh, ct);
  nfct_destroy(ct);
  if (built < 0) return 0;
  // libnetfilter_conntrack 1.0.9 has no attribute for CTA_MARK_MASK in an update: appended by hand.
  size_t at = NLMSG_ALIGN(nlh->nlmsg_len);
  struct nlattr* mask = (struct nlattr*)(out + at);
  mask->nla_type = CTA_MARK_MASK;
  mask->nla_len = NLA_HDRLEN + sizeof(uint32_t);
  uint32_t be = htonl(bit);
  memcpy(out + at + NLA_HDRLEN, &be, sizeof be);
  nlh->nlmsg_len = at + NLA_ALIGN(mask->nla_len);
  return nlh->nlmsg_len;
}

// Reads acknowledgements until `expected` have arrived (or the socket fails).
static void read_acks(Job* job, int fd, uint32_t expected, char* buffer, size_t size) {
  uint32_t seen = 0;
  while (seen < expected) {
    ssize_t n = recv(fd, buffer, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // Lost acknowledgements (ENOBUFS) or none within the timeout: count what is missing as failed.
      int e = errno;
      for (; seen < expected; seen++) note_error(job, e);
      return;
    }
    int left = (int)n;
    for (struct nlmsghdr* h = (struct nlmsghdr*)buffer; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type != NLMSG_ERROR) continue;
      struct nlmsgerr* err = (struct nlmsgerr*)NLMSG_DATA(h);
      seen++;
      if (err->error == 0) job->cleared++;
      else if (err->error == -ENOENT) job->gone++;
      else note_error(job, -err->error);
    }
  }
}

static void execute(napi_env env, void* data) {
  (void)env;
  Job* job = (Job*)data;
  int fd = open_socket();
  if (fd < 0) {
    for (uint32_t i = 0; i < job->count; i++) note_error(job, -fd);
    return;
  }
  char* out = malloc((size_t)CHUNK * MESSAGE_ROOM);
  size_t ack_room = 256 * 1024;
  char* acks = malloc(ack_room);
  if (out == NULL || acks == NULL) {
    for (uint32_t i = 0; i < job->count; i++) note_error(job, ENOMEM);
  } else {
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    for (uint32_t start = 0; start < job->count; start += CHUNK) {
      uint32_t end = start + CHUNK < job->count ? start + CHUNK : job->count;
      size_t len = 0;
      uint32_t queued = 0;
      for (uint32_t i = start; i < end; i++) {
        size_t m = build_update(out + len, job->family, job->tuples + (size_t)i * RECORD_BYTES, i + 1, job->bit);
        if (m == 0) {
          note_error(job, EINVAL);
          continue;
        }
        len += NLMSG_ALIGN(m);
        queued++;
      }
      if (queued == 0) continue;
      ssize_t sent = sendto(fd, out, len, 0, (struct sockaddr*)&kernel, sizeof kernel);
      if (sent < 0) {
        int e = errno;
        for (uint32_t i = 0; i < queued; i++) note_error(job, e);
        continue;
      }
      read_acks(job, fd, queued, acks, ack_room);
    }
  }
  free(out);
  free(acks);
  close(fd);
}

typedef struct {
  napi_async_work work;
  napi_deferred deferred;
  int family;
  uint32_t bit;
  uint8_t* records;
  size_t count;
  size_t capacity;
  int error;
} ListJob;

static int on_entry(enum nf_conntrack_msg_type type, struct nf_conntrack* ct, void* data) {
  (void)type;
  ListJob* job = (ListJob*)data;
  if (job->count == job->capacity) {
    size_t capacity = job->capacity ? job->capacity * 2 : 1024;
    uint8_t* grown = realloc(job->records, capacity * RECORD_BYTES);
    if (grown == NULL) {
      job->error = ENOMEM;
      return NFCT_CB_STOP;
    }
    job->records = grown;
    job->capacity = capacity;
  }
  uint8_t* r = job->records + job->count * RECORD_BYTES;
  memset(r, 0, RECORD_BYTES);
  uint8_t protocol = nfct_get_attr_u8(ct, ATTR_ORIG_L4PROTO);
  r[OFF_PROTOCOL] = protocol;
  if (protocol == IPPROTO_ICMP || protocol == IPPROTO_ICMPV6) {
    r[OFF_ICMP_TYPE] = nfct_get_attr_u8(ct, ATTR_ICMP_TYPE);
    r[OFF_ICMP_CODE] = nfct_get_attr_u8(ct, ATTR_ICMP_CODE);
    uint16_t id = nfct_get_attr_u16(ct, ATTR_ICMP_ID);
    memcpy(r + OFF_ICMP_ID, &id, 2);
  } else {
    uint16_t sport = nfct_get_attr_u16(ct, ATTR_ORIG_PORT_SRC);
    uint16_t dport = nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST);
    uint16_t rsport = nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC);
    memcpy(r + OFF_SRC_PORT, &sport, 2);
    memcpy(r + OFF_DST_PORT, &dport, 2);
    memcpy(r + OFF_REPLY_SRC_PORT, &rsport, 2);
  }
  if (job->family == 6) {
    memcpy(r + OFF_SRC, nfct_get_attr(ct, ATTR_ORIG_IPV6_SRC), 16);
    memcpy(r + OFF_DST, nfct_get_attr(ct, ATTR_ORIG_IPV6_DST), 16);
    memcpy(r + OFF_REPLY_SRC, nfct_get_attr(ct, ATTR_REPL_IPV6_SRC), 16);
  } else {
    uint32_t a = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_SRC);
    uint32_t b = nfct_get_attr_u32(ct, ATTR_ORIG_IPV4_DST);
    uint32_t c = nfct_get_attr_u32(ct, ATTR_REPL_IPV4_SRC);
    memcpy(r + OFF_SRC, &a, 4);
    memcpy(r + OFF_DST, &b, 4);
    memcpy(r + OFF_REPLY_SRC, &c, 4);
  }
  uint32_t mark = htonl(nfct_get_attr_u32(ct, ATTR_MARK));
  memcpy(r + OFF_MARK, &mark, 4);
  job->count++;
  return NFCT_CB_CONTINUE;
}

static void list_execute(napi_env env, void* data) {
  (void)env;
  ListJob* job = (ListJob*)data;
  struct nfct_handle* h = nfct_open(CONNTRACK, 0);
  if (h == NULL) {
    job->error = errno ? errno : EIO;
    return;
  }
  struct nfct_filter_dump* filter = nfct_filter_dump_create();
  if (filter == NULL) {
    job->error = ENOMEM;
    nfct_close(h);
    return;
  }
  struct nfct_filter_dump_mark mark = { .val = job->bit, .mask = job->bit };
  nfct_filter_dump_set_attr(filter, NFCT_FILTER_DUMP_MARK, &mark);
  nfct_filter_dump_set_attr_u8(filter, NFCT_FILTER_DUMP_L3NUM, job->family == 6 ? AF_INET6 : AF_INET);
  nfct_callback_register(h, NFCT_T_ALL, on_entry, job);
  if (nfct_query(h, NFCT_Q_DUMP_FILTER, filter) < 0 && job->error == 0) job->error = errno ? errno : EIO;
  nfct_filter_dump_destroy(filter);
  nfct_close(h);
}

static void set_number(napi_env env, napi_value obj, const char* name, double value) {
  napi_value v;
  napi_create_double(env, value, &v);
  napi_set_named_property(env, obj, name, v);
}

static void complete(napi_env env, napi_status status, void* data) {
  Job* job = (Job*)data;
  napi_value result;
  napi_create_object(env, &result);
  if (status != napi_ok) {
    job->failed = job->count - job->cleared - job->gone;
    if (job->first_error == 0) job->first_error = ECANCELED;
  }
  set_number(env, result, "cleared", job->cleared);
  set_number(env, result, "gone", job->gone);
  set_number(env, result, "failed", job->failed);
  set_number(env, result, "firstError", job->first_error);
  napi_resolve_deferred(env, job->deferred, result);
  napi_delete_async_work(env, job->work);
  free(job->tuples);
  free(job);
}

static void list_complete(napi_env env, napi_status status, void* data) {
  ListJob* job = (ListJob*)data;
  if (status != napi_ok || job->error != 0) {
    napi_value message, error, code;
    char text[128];
    snprintf(text, sizeof text, "conntrack dump failed: %s", strerror(job->error ? job->error : ECANCELED));
    napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message);
    napi_create_error(env, NULL, message, &error);
    napi_create_int32(env, job->error ? job->error : ECANCELED, &code);
    napi_set_named_property(env, error, "errno", code);
    napi_reject_deferred(env, job->deferred, error);
  } else {
    napi_value buffer;
    void* bytes;
    napi_create_buffer_copy(env, job->count * RECORD_BYTES, job->records ? (void*)job->records : (void*)"", &bytes, &buffer);
    napi_resolve_deferred(env, job->deferred, buffer);
  }
  napi_delete_async_work(env, job->work);
  free(job->records);
  free(job);
}

static napi_value throw_type(napi_env env, const char* message) {
  napi_throw_type_error(env, NULL, message);
  return NULL;
}

// clearMarkBit(family, tuples, count, bit) -> Promise<{ cleared, gone, failed, firstError }>
static napi_value clear_mark_bit(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 4) return throw_type(env, "clearMarkBit(family, tuples, count, bit): four arguments");
  int32_t family;
  uint32_t count, bit;
  if (napi_get_value_int32(env, argv[0], &family) != napi_ok || (family != 4 && family != 6)) return throw_type(env, "clearMarkBit: family must be 4 or 6");
  bool is_buffer = false;
  napi_is_buffer(env, argv[1], &is_buffer);
  if (!is_buffer) return throw_type(env, "clearMarkBit: tuples must be a Buffer");
  void* bytes;
  size_t length;
  napi_get_buffer_info(env, argv[1], &bytes, &length);
  if (napi_get_value_uint32(env, argv[2], &count) != napi_ok || (size_t)count * RECORD_BYTES > length) return throw_type(env, "clearMarkBit: count exceeds the tuples buffer (64 bytes each)");
  if (napi_get_value_uint32(env, argv[3], &bit) != napi_ok || bit == 0) return throw_type(env, "clearMarkBit: bit must be a non-zero u32");

  Job* job = calloc(1, sizeof(Job));
  if (job == NULL) return throw_type(env, "clearMarkBit: out of memory");
  job->family = family;
  job->count = count;
  job->bit = bit;
  // A copy: the worker thread must not read a buffer the JavaScript side may reuse or free.
  job->tuples = malloc((size_t)count * RECORD_BYTES + 1);
  if (job->tuples == NULL) {
    free(job);
    return throw_type(env, "clearMarkBit: out of memory");
  }
  memcpy(job->tuples, bytes, (size_t)count * RECORD_BYTES);
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, "kwp-conntrack-netlink", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

// listMarked(family, bit) -> Promise<Buffer>: 64-byte records of the entries whose mark has `bit`.
static napi_value list_marked(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t family;
  uint32_t bit;
  if (argc < 2 || napi_get_value_int32(env, argv[0], &family) != napi_ok || (family != 4 && family != 6)) return throw_type(env, "listMarked(family, bit): family must be 4 or 6");
  if (napi_get_value_uint32(env, argv[1], &bit) != napi_ok || bit == 0) return throw_type(env, "listMarked: bit must be a non-zero u32");
  ListJob* job = calloc(1, sizeof(ListJob));
  if (job == NULL) return throw_type(env, "listMarked: out of memory");
  job->family = family;
  job->bit = bit;
  napi_value promise, name;
  napi_create_promise(env, &job->deferred, &promise);
  napi_create_string_utf8(env, "kwp-conntrack-netlink-list", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, list_execute, list_complete, job, &job->work);
  napi_queue_async_work(env, job->work);
  return promise;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "listMarked", NAPI_AUTO_LENGTH, list_marked, NULL, &fn);
  napi_set_named_property(env, exports, "listMarked", fn);
  napi_create_function(env, "clearMarkBit", NAPI_AUTO_LENGTH, clear_mark_bit, NULL, &fn);
  napi_set_named_property(env, exports, "clearMarkBit", fn);
  napi_value size;
  napi_create_uint32(env, RECORD_BYTES, &size);
  napi_set_named_property(env, exports, "recordBytes", size);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
