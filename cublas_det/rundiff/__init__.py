"""Where two training runs first diverge: the layouts of their dumps (:mod:`.layouts`), the streamed
comparison (:mod:`.diff`) and the digest recorder a training loop calls (:mod:`.recorder`)."""
