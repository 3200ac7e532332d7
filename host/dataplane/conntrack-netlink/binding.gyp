{
  "targets": [
    {
      "target_name": "conntrack_netlink",
      "sources": ["src/conntrack_netlink.c"],
      "libraries": ["-lnetfilter_conntrack"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
