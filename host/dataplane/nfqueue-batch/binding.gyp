{
  "targets": [
    {
      "target_name": "nfqueue_batch",
      "sources": ["src/nfqueue_batch.c"],
      "libraries": ["-lnetfilter_queue", "-lnfnetlink"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
