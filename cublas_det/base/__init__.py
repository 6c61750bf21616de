"""What every part uses: errors and exit codes, words and tables, element types, the stored-record validator,
integers, phase timers and the tasks a program entered by ``run`` or ``capture`` runs."""
