"""InfiniBand fabric as the definition declares it: the expected layout (`layout`), an ibsim net
file of it (`ibsim`) and a check of the as-built fabric against it (`check`, from ibnetdiscover
output). All pure: the CLI reads and writes the files."""
