"""Lock providers: file (embedded default), in-process, ZooKeeper and DynamoDB."""
