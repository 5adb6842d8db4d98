-- Where a replica is reached: the address its container host publishes it on
-- (GANTRY_CONTAINER_HOST_ADDRESS), beside the port. With several container hosts the gateway, the
-- metric scrapes and adapter loads go to that address, not to the loopback address of whichever
-- process asks. Rows from before this column have NULL, read as 127.0.0.1 (all hosts were one).
ALTER TABLE deployment_replicas ADD COLUMN address text;
