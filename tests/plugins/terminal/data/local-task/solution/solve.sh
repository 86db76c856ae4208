echo 42 > /app/answer.txt
